"""The simulated clusters: each profile's operator version, switches and GPUs, and what those GPUs print."""
