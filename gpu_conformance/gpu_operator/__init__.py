"""What a GPU Operator install is, release by release: one model read by the simulated operator
(sim/operator/install.py, sim/profiles/catalogue.py) and by the unit tests' snapshot factory (tests/factory.py), so
the two cannot drift apart.

`releases` holds each release's Helm default image tags and the image references built from them; `hardware` the
GPUs a node can carry (what NVML reports, what the driver branch's CUDA version is); `gpu_node` the GFD
labels and extended resources a GPU node shows once GFD and the device plugin run; `operand_specs` what the
operator renders into its operands for a release and a ClusterPolicy (validator stages, device plugin and toolkit
env, operand labels, RuntimeClasses); `operand_daemonsets` the DaemonSets it renders from a ClusterPolicy (containers,
commands, env, volumes); `clusterpolicy` the ClusterPolicy's spec (a release's defaults and the admin's switches) and
its status once ready; `operator_deployment` the chart's operator Deployment; `nfd` NFD's sub-chart and the node
labels it publishes; `cuda_validator` the pod the validator runs a CUDA sample in; `nvidiadriver` the NVIDIADriver CR
and its driver DaemonSet; `dra_driver` the DRA driver's objects (the operator's, its chart's, the GPUCluster) and the
ResourceSlices it publishes. Nothing here talks to a cluster.
"""
