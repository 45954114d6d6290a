"""NVIDIA's DRA driver for GPUs as its own Helm chart installs it (NVIDIA/k8s-dra-driver-gpu, chart
`nvidia-dra-driver-gpu`, read at v25.8.1): the names a check needs to find its kubelet plugin beside a ClusterPolicy.

deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml names the DaemonSet `<chart name>-kubelet-plugin`
in the release namespace; _helpers.tpl gives its pods `app.kubernetes.io/name: <chart name>` (templateLabels) and
`<chart name>-component: kubelet-plugin` (selectorLabels). The chart name is `nvidia-dra-driver-gpu` unless
nameOverride changes it, which the suite does not follow. No imports: the reader and the checks both use it.
"""

from __future__ import annotations

CHART_NAME = "nvidia-dra-driver-gpu"
# The namespace NVIDIA's install instructions create the release in (helm install --namespace ... --create-namespace);
# the chart refuses `default` unless allowDefaultNamespace (templates/validation.yaml). Documentation, not a lookup:
# the pods are found cluster-wide by label.
DEFAULT_NAMESPACE = "nvidia-dra-driver-gpu"
KUBELET_PLUGIN_DAEMONSET = f"{CHART_NAME}-kubelet-plugin"
KUBELET_PLUGIN_LABELS = {"app.kubernetes.io/name": CHART_NAME, f"{CHART_NAME}-component": "kubelet-plugin"}
# One label-selected LIST of pods across namespaces (the chart's release namespace is the user's choice).
KUBELET_PLUGIN_SELECTOR = ",".join(f"{k}={v}" for k, v in KUBELET_PLUGIN_LABELS.items())
# The kubelet plugin's container serving gpu.nvidia.com, rendered only with resources.gpus.enabled (whose chart
# default true is refused by templates/validation.yaml unless gpuResourcesEnabledOverride=true).
GPUS_CONTAINER = "gpus"
