"""Units for rendering: SI inside, GiB only where a person reads the number."""

GIB = 2**30
"""Bytes per GiB."""
