"""Shared services of the test bed: the API client, its watch cache, process supervision."""
