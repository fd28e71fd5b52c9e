"""Finding the best layout: evaluation, screening, sampling (TPE), objectives, ranking."""
