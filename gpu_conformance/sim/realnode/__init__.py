"""The real-node tier: a real kubelet + containerd with a fake GPU, joined to the simulated control plane."""
