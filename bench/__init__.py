"""Benchmarks: accuracy of the throughput model and the fitted default profiles."""
