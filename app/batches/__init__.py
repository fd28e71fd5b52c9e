"""Batches: many plan requests from one CSV, run as plan jobs."""
