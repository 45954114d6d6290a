"""One module per layer; each check is a small pure function registered with @check."""
