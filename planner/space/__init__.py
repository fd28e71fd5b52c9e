"""The layout space: enumeration, Megatron's rules, and the communication flags a layout gets."""
