"""Per-GPU memory estimate: weights, gradients, optimizer states, activations, per stage."""
