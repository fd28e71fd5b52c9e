"""The model's arithmetic: parameter counts, FLOPs, layer shapes, the pipeline split, HF configs."""
