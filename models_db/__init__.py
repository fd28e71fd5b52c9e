"""The catalog: model architectures, GPUs, cluster presets and calibration profiles."""
