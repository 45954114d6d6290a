"""The simulated control plane: etcd, kube-apiserver, scheduler, controller-manager and kwok as processes."""
