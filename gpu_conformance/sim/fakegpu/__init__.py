"""The fake GPU stack real nodes run (kind tier, a user's cluster): device plugin, fake NVML, runtime."""
