"""Reading the cluster: connection, the one-shot snapshot, permissions."""
