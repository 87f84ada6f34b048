package deploy

import (
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The compose file's fields this test knows; decoding refuses any other.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]struct{}       `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		Retries     int      `yaml:"retries"`
		StartPeriod string   `yaml:"start_period"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	StopGracePeriod string `yaml:"stop_grace_period"`
	Restart         string `yaml:"restart"`
}

// TestCompose decodes deploy/compose.yaml strictly and checks that it is a
// cluster that would come up: every flag exists on the real binary, the
// brokers point at the controller's port and advertise their own service
// names, ids are distinct, data lives on declared volumes, health checks
// probe the port each daemon listens on, and the brokers wait for a healthy
// controller.
func TestCompose(t *testing.T) {
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := decodeStrict[composeFile](t, "compose.yaml", data)
	if len(docs) != 1 {
		t.Fatalf("compose.yaml holds %d documents, want 1", len(docs))
	}
	f := docs[0]
	var names []string
	for n := range f.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	if want := []string{"broker-1", "broker-2", "broker-3", "controller", "jaeger"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	brokerFlags, ctlFlags := daemonFlags(t, false), daemonFlags(t, true)

	jaeger := f.Services["jaeger"]
	if !strings.HasPrefix(jaeger.Image, "docker.io/jaegertracing/jaeger:") || !slices.Contains(jaeger.Ports, "4317:4317") {
		t.Errorf("jaeger: image %q ports %v: want the official image with OTLP/gRPC on 4317", jaeger.Image, jaeger.Ports)
	}

	ctl := f.Services["controller"]
	if len(ctl.Command) == 0 || ctl.Command[0] != "controller" {
		t.Fatalf("controller command %q: want replicad controller ...", ctl.Command)
	}
	ctlArgs := parseArgs(t, "controller", ctl.Command[1:], ctlFlags)
	ctlPort := checkDaemon(t, f, "controller", ctl, ctlArgs, ctlArgs["store"])
	if ctl.DependsOn["jaeger"].Condition != "service_started" {
		t.Errorf("controller depends_on %v: want jaeger started", ctl.DependsOn)
	}

	ids := map[string]string{}
	for _, name := range []string{"broker-1", "broker-2", "broker-3"} {
		svc := f.Services[name]
		args := parseArgs(t, name, svc.Command, brokerFlags)
		port := checkDaemon(t, f, name, svc, args, args["log-dirs"])
		if other, dup := ids[args["id"]]; dup {
			t.Errorf("%s and %s both have --id %s", other, name, args["id"])
		}
		ids[args["id"]] = name
		if "broker-"+args["id"] != name {
			t.Errorf("%s has --id %s", name, args["id"])
		}
		if want := net.JoinHostPort(name, port); args["advertised-address"] != want {
			t.Errorf("%s advertises %q, want %q (its service name: what the others dial)", name, args["advertised-address"], want)
		}
		if want := "controller:" + ctlPort; args["controller"] != want {
			t.Errorf("%s --controller %q, want %q", name, args["controller"], want)
		}
		if svc.DependsOn["controller"].Condition != "service_healthy" {
			t.Errorf("%s depends_on %v: want the controller healthy", name, svc.DependsOn)
		}
		if isr := args["min-insync-replicas"]; isr != "" && isr > "3" {
			t.Errorf("%s --min-insync-replicas %s with 3 brokers", name, isr)
		}
		if svc.StopGracePeriod == "" {
			t.Errorf("%s has no stop_grace_period (the controlled shutdown needs more than the default 10s)", name)
		}
		if _, _, err := net.SplitHostPort(args["metrics-listen"]); err != nil {
			t.Errorf("%s --metrics-listen %q: %v", name, args["metrics-listen"], err)
		}
	}
}

// checkDaemon checks what the controller and the brokers share and returns
// the port the daemon listens on.
func checkDaemon(t *testing.T, f composeFile, name string, svc composeService, args map[string]string, dataPath string) string {
	t.Helper()
	if !strings.Contains(svc.Image, "replicad") {
		t.Errorf("%s: image %q", name, svc.Image)
	}
	_, port, err := net.SplitHostPort(args["listen"])
	if err != nil || !strings.HasPrefix(args["listen"], "0.0.0.0:") {
		t.Errorf("%s --listen %q: want 0.0.0.0:PORT (reachable from the other containers)", name, args["listen"])
	}
	// The data path is on a declared named volume.
	mounted := false
	for _, v := range svc.Volumes {
		vol, target, ok := strings.Cut(v, ":")
		if !ok {
			t.Errorf("%s: volume %q is not NAME:PATH", name, v)
			continue
		}
		if _, declared := f.Volumes[vol]; !declared {
			t.Errorf("%s mounts volume %q, not declared under volumes", name, vol)
		}
		if dataPath == target || strings.HasPrefix(dataPath, strings.TrimSuffix(target, "/")+"/") {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("%s keeps its data in %q, on no volume of %v: it would be lost with the container", name, dataPath, svc.Volumes)
	}
	hc := svc.Healthcheck
	if hc == nil || len(hc.Test) < 3 || hc.Test[0] != "CMD" || hc.Test[1] != "/usr/local/bin/grpc-health-probe" {
		t.Fatalf("%s healthcheck %+v: want CMD /usr/local/bin/grpc-health-probe -addr=...", name, hc)
	}
	if want := fmt.Sprintf("-addr=127.0.0.1:%s", port); !slices.Contains(hc.Test, want) {
		t.Errorf("%s healthcheck %v does not probe its --listen port (%s)", name, hc.Test, want)
	}
	if hc.Retries < 1 || hc.Interval == "" {
		t.Errorf("%s healthcheck %+v: want an interval and retries", name, hc)
	}
	published := false
	for _, p := range svc.Ports {
		if strings.HasSuffix(p, ":"+port) {
			published = true
		}
	}
	if !published {
		t.Errorf("%s publishes %v, not its gRPC port %s", name, svc.Ports, port)
	}
	if ep := svc.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; ep != "http://jaeger:4317" {
		t.Errorf("%s exports traces to %q, want http://jaeger:4317", name, ep)
	}
	return port
}
