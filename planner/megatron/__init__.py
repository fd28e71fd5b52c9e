"""Megatron-LM's side: launch flags and arguments, and parsing its training logs."""
