"""The kind tier: a kind cluster from a node image built offline here, a fake-GPU stack, the suite as a Job."""
