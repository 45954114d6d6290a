// fake-gpu-device-plugin advertises fake GPUs to a kubelet through the
// device-plugin API v1beta1 and hands them out the way NVIDIA's device plugin
// does, so a real container runtime can be tested without a GPU:
//
//   - strategy cdi-cri: CDI device names "<kind>=<index>" in the CRI CDIDevices
//     field (containerd resolves them against the CDI specs in its spec dirs);
//   - strategy cdi-annotations: the same names in a cdi.k8s.io/ annotation;
//   - strategy envvar: NVIDIA_VISIBLE_DEVICES=<ids> only (the pre-CDI way,
//     which needs the NVIDIA runtime; without it no device reaches the container).
//
// The plugin serves on <plugin-dir>/<socket>, registers at
// <plugin-dir>/kubelet.sock, and serves and registers again when the kubelet
// removes its socket (which a restarting kubelet does). SIGTERM stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// version is stamped at build time (-X main.version=...) so a cached binary can be checked.
var version = "dev"

type plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	ids        []string       // device IDs the kubelet sees (GPU UUIDs)
	index      map[string]int // device ID -> GPU index, the CDI device name
	cdiKind    string
	strategies map[string]bool
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	devices := make([]*pluginapi.Device, 0, len(p.ids))
	for _, id := range p.ids {
		devices = append(devices, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devices}); err != nil {
		return err
	}
	<-stream.Context().Done() // fake devices never change health
	return nil
}

func (p *plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, creq := range req.ContainerRequests {
		ids := append([]string(nil), creq.DevicesIds...)
		sort.Slice(ids, func(a, b int) bool { return p.index[ids[a]] < p.index[ids[b]] })
		names := make([]string, 0, len(ids))
		for _, id := range ids {
			n, ok := p.index[id]
			if !ok {
				return nil, fmt.Errorf("unknown device %q", id)
			}
			names = append(names, p.cdiKind+"="+strconv.Itoa(n))
		}
		cresp := &pluginapi.ContainerAllocateResponse{}
		if p.strategies["cdi-cri"] {
			for _, name := range names {
				cresp.CdiDevices = append(cresp.CdiDevices, &pluginapi.CDIDevice{Name: name})
			}
		}
		if p.strategies["cdi-annotations"] {
			key := "cdi.k8s.io/fake-gpu-device-plugin_" + strings.Join(ids, "_")
			cresp.Annotations = map[string]string{key: strings.Join(names, ",")}
		}
		if p.strategies["envvar"] {
			cresp.Envs = map[string]string{"NVIDIA_VISIBLE_DEVICES": strings.Join(ids, ",")}
		}
		log.Printf("allocate %v -> cdi %v (strategies %v)", ids, names, keys(p.strategies))
		resp.ContainerResponses = append(resp.ContainerResponses, cresp)
	}
	return resp, nil
}

func (p *plugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{}, nil
}

func (p *plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// serve listens on the plugin socket; the returned server stops with Stop().
func serve(p *plugin, socket string) (*grpc.Server, error) {
	_ = os.Remove(socket)
	lis, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	return srv, nil
}

func register(pluginDir, socketName, resource string) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(pluginDir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: socketName, ResourceName: resource,
	})
	return err
}

func main() {
	pluginDir := flag.String("plugin-dir", pluginapi.DevicePluginPath, "directory holding kubelet.sock")
	socketName := flag.String("socket", "fake-nvidia-gpu.sock", "this plugin's socket name in plugin-dir")
	resource := flag.String("resource", "nvidia.com/gpu", "extended resource name")
	devices := flag.String("devices", "", "comma-separated device IDs (GPU UUIDs), index order")
	cdiKind := flag.String("cdi-kind", "nvidia.com/gpu", "CDI kind of the device names")
	strategy := flag.String("strategy", "cdi-cri,cdi-annotations", "comma-separated: cdi-cri, cdi-annotations, envvar")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println("fake-gpu-device-plugin", version)
		return
	}
	log.SetPrefix("fake-gpu-device-plugin: ")

	p := &plugin{index: map[string]int{}, cdiKind: *cdiKind, strategies: map[string]bool{}}
	for i, id := range strings.Split(*devices, ",") {
		if id = strings.TrimSpace(id); id != "" {
			p.ids = append(p.ids, id)
			p.index[id] = i
		}
	}
	if len(p.ids) == 0 {
		log.Fatal("-devices is empty")
	}
	for _, s := range strings.Split(*strategy, ",") {
		switch s = strings.TrimSpace(s); s {
		case "cdi-cri", "cdi-annotations", "envvar":
			p.strategies[s] = true
		default:
			log.Fatalf("unknown strategy %q (want cdi-cri, cdi-annotations or envvar)", s)
		}
	}

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	socket := filepath.Join(*pluginDir, *socketName)
	for {
		srv, err := serve(p, socket)
		if err != nil {
			log.Fatalf("listen on %s: %v", socket, err)
		}
		// Register until the kubelet accepts; a starting or restarting kubelet wipes the plugin
		// directory, so a vanished socket means: serve and register again.
		registered := false
		for {
			if _, err := os.Stat(socket); err != nil {
				log.Printf("socket %s gone, serving and registering again", socket)
				break
			}
			if !registered {
				if err := register(*pluginDir, *socketName, *resource); err != nil {
					log.Printf("register with the kubelet: %v (retrying)", err)
				} else {
					registered = true
					log.Printf("registered %s with %d devices", *resource, len(p.ids))
				}
			}
			select {
			case <-stop:
				srv.Stop()
				_ = os.Remove(socket)
				return
			case <-time.After(time.Second):
			}
		}
		srv.Stop()
	}
}
