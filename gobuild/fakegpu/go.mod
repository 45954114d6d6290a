// The real-node tier's own fake-GPU binaries: a device plugin that speaks the
// kubelet's device-plugin API v1beta1 and a pause binary for the pod sandbox
// image. Uses the API package of the same k8s.io/kubelet release as the kubelet
// the tier runs (v0.36.3), already in the module cache from the control plane.
module gpu-operator-conformance.local/gobuild/fakegpu

go 1.26.0

require (
	google.golang.org/grpc v1.79.3
	k8s.io/kubelet v0.36.3
)

require (
	golang.org/x/net v0.49.0 // indirect
	golang.org/x/sys v0.40.0 // indirect
	golang.org/x/text v0.33.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260128011058-8636f8732409 // indirect
	google.golang.org/protobuf v1.36.12-0.20260120151049-f2248ac996af // indirect
)
