"""Plan jobs: the service that queues them and the workers that run them."""
