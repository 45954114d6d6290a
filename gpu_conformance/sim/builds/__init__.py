"""Go builds of the test bed (control plane, node, the real operator) and OCI image archives."""
