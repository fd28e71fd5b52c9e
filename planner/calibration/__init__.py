"""Fitting performance profiles to measurements, and transferring them across GPUs."""
