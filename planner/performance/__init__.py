"""The throughput model: step time assembled from one term per module, and its profile."""
