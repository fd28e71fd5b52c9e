"""The catalog of models, GPUs and clusters: built-in presets plus user entries."""
