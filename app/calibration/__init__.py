"""Calibration: uploaded measurements and the performance profiles fitted to them."""
