"""Simulated cluster: a real Kubernetes control plane on 127.0.0.1 with kwok's simulated GPU nodes."""
