"""Benchmarks: the throughput and memory models against measured and published runs, the fitted
default profiles, the search's quality and speed, and the service under load.

Each runnable module (``python -m bench.accuracy``, ...) writes its page in ``bench/results/``
(Markdown and JSON); ``python -m bench.summary`` copies the headline numbers into the README."""
