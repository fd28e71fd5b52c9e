"""Planning: one-layout evaluations, asynchronous plan jobs and their workers, scaling curves."""
