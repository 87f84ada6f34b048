package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The Kubernetes fields the manifests use, per kind: decoding refuses any
// other field, so a typo (readinesProbe) or a field in the wrong place
// fails the test instead of being dropped by the API server's pruning.

type k8sMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type k8sHeader struct {
	APIVersion string  `yaml:"apiVersion"`
	Kind       string  `yaml:"kind"`
	Metadata   k8sMeta `yaml:"metadata"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type service struct {
	k8sHeader `yaml:",inline"`
	Spec      struct {
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
		Ports                    []servicePort     `yaml:"ports"`
	} `yaml:"spec"`
}

type servicePort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort string `yaml:"targetPort"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type probe struct {
	GRPC *struct {
		Port    int    `yaml:"port"`
		Service string `yaml:"service"`
	} `yaml:"grpc"`
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
	InitialDelaySeconds int `yaml:"initialDelaySeconds"`
	PeriodSeconds       int `yaml:"periodSeconds"`
	FailureThreshold    int `yaml:"failureThreshold"`
	TimeoutSeconds      int `yaml:"timeoutSeconds"`
}

type container struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []envVar `yaml:"env"`
	Ports   []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
	StartupProbe   *probe `yaml:"startupProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext *struct {
		AllowPrivilegeEscalation bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
}

type podTemplate struct {
	Metadata k8sMeta `yaml:"metadata"`
	Spec     struct {
		TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               *struct {
			RunAsNonRoot bool `yaml:"runAsNonRoot"`
			RunAsUser    int  `yaml:"runAsUser"`
			RunAsGroup   int  `yaml:"runAsGroup"`
			FSGroup      int  `yaml:"fsGroup"`
		} `yaml:"securityContext"`
		TopologySpreadConstraints []struct {
			MaxSkew           int           `yaml:"maxSkew"`
			TopologyKey       string        `yaml:"topologyKey"`
			WhenUnsatisfiable string        `yaml:"whenUnsatisfiable"`
			LabelSelector     labelSelector `yaml:"labelSelector"`
		} `yaml:"topologySpreadConstraints"`
		Containers []container `yaml:"containers"`
		Volumes    []struct {
			Name string `yaml:"name"`
		} `yaml:"volumes"`
	} `yaml:"spec"`
}

type statefulSet struct {
	k8sHeader `yaml:",inline"`
	Spec      struct {
		ServiceName          string        `yaml:"serviceName"`
		Replicas             int           `yaml:"replicas"`
		PodManagementPolicy  string        `yaml:"podManagementPolicy"`
		Selector             labelSelector `yaml:"selector"`
		Template             podTemplate   `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				AccessModes []string `yaml:"accessModes"`
				Resources   struct {
					Requests map[string]string `yaml:"requests"`
				} `yaml:"resources"`
			} `yaml:"spec"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type deployment struct {
	k8sHeader `yaml:",inline"`
	Spec      struct {
		Replicas int `yaml:"replicas"`
		Strategy struct {
			Type          string `yaml:"type"`
			RollingUpdate struct {
				MaxSurge       int `yaml:"maxSurge"`
				MaxUnavailable int `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
		Selector labelSelector `yaml:"selector"`
		Template podTemplate   `yaml:"template"`
	} `yaml:"spec"`
}

type pdb struct {
	k8sHeader `yaml:",inline"`
	Spec      struct {
		MaxUnavailable int           `yaml:"maxUnavailable"`
		Selector       labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type kustomization struct {
	Resources []string `yaml:"resources"`
}

// manifests are the decoded objects of deploy/kubernetes, by kind and name.
type manifests struct {
	services     map[string]service
	statefulSets map[string]statefulSet
	deployments  map[string]deployment
	pdbs         map[string]pdb
}

// strict decodes one document (a node) into v, refusing unknown fields.
func strict(node *yaml.Node, v any) error {
	b, err := yaml.Marshal(node)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	return dec.Decode(v)
}

func loadManifests(t *testing.T) manifests {
	t.Helper()
	var kust kustomization
	for _, d := range decodeStrict[kustomization](t, "kustomization.yaml", mustRead(t, "kubernetes/kustomization.yaml")) {
		kust.Resources = append(kust.Resources, d.Resources...)
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(kust.Resources, base) {
			t.Errorf("%s is not in kustomization.yaml's resources %v: kubectl apply -k would leave it out", base, kust.Resources)
		}
	}
	m := manifests{services: map[string]service{}, statefulSets: map[string]statefulSet{}, deployments: map[string]deployment{}, pdbs: map[string]pdb{}}
	for _, res := range kust.Resources {
		dec := yaml.NewDecoder(bytes.NewReader(mustRead(t, filepath.Join("kubernetes", res))))
		for i := 1; ; i++ {
			var node yaml.Node
			if err := dec.Decode(&node); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			var h struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
			}
			if err := node.Decode(&h); err != nil {
				t.Fatalf("%s document %d: %v", res, i, err)
			}
			where := fmt.Sprintf("%s document %d (%s)", res, i, h.Kind)
			var err error
			var name string
			switch h.APIVersion + " " + h.Kind {
			case "v1 Service":
				var o service
				err, name = strict(&node, &o), o.Metadata.Name
				m.services[o.Metadata.Name] = o
			case "apps/v1 StatefulSet":
				var o statefulSet
				err, name = strict(&node, &o), o.Metadata.Name
				m.statefulSets[o.Metadata.Name] = o
			case "apps/v1 Deployment":
				var o deployment
				err, name = strict(&node, &o), o.Metadata.Name
				m.deployments[o.Metadata.Name] = o
			case "policy/v1 PodDisruptionBudget":
				var o pdb
				err, name = strict(&node, &o), o.Metadata.Name
				m.pdbs[o.Metadata.Name] = o
			default:
				t.Fatalf("%s: unexpected %s %s", where, h.APIVersion, h.Kind)
			}
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if name == "" {
				t.Fatalf("%s: no metadata.name", where)
			}
		}
	}
	return m
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKubernetes decodes the manifests strictly and checks what would
// otherwise show only on a cluster: probes on ports the containers open,
// mounts of volumes that exist, selectors that select, the broker and
// controller flags (against the real binary) agreeing with the Services
// and with each other, and a disruption budget that keeps acks=all
// writable. There is no cluster here to apply them to.
func TestKubernetes(t *testing.T) {
	m := loadManifests(t)
	for _, want := range []struct {
		kind  string
		names []string
		got   int
	}{
		{"Service", []string{"etcd", "replicad-controller", "replicad-headless", "replicad"}, len(m.services)},
		{"StatefulSet", []string{"etcd", "replicad"}, len(m.statefulSets)},
		{"Deployment", []string{"replicad-controller"}, len(m.deployments)},
		{"PodDisruptionBudget", []string{"etcd", "replicad"}, len(m.pdbs)},
	} {
		if want.got != len(want.names) {
			t.Errorf("%d %s objects, want %v", want.got, want.kind, want.names)
		}
	}
	for name, ss := range m.statefulSets {
		claims := map[string]bool{}
		for _, c := range ss.Spec.VolumeClaimTemplates {
			claims[c.Metadata.Name] = true
		}
		checkPod(t, "StatefulSet "+name, ss.Spec.Selector, ss.Spec.Template, claims)
		hs, ok := m.services[ss.Spec.ServiceName]
		if !ok || hs.Spec.ClusterIP != "None" || !hs.Spec.PublishNotReadyAddresses {
			t.Errorf("StatefulSet %s: serviceName %q is not a headless Service publishing not-ready addresses", name, ss.Spec.ServiceName)
		}
	}
	for name, d := range m.deployments {
		checkPod(t, "Deployment "+name, d.Spec.Selector, d.Spec.Template, nil)
	}
	// Every Service and PDB selects the pods of some workload, and a
	// Service's named target ports exist on them.
	templates := map[string]podTemplate{}
	for n, ss := range m.statefulSets {
		templates["StatefulSet "+n] = ss.Spec.Template
	}
	for n, d := range m.deployments {
		templates["Deployment "+n] = d.Spec.Template
	}
	selects := func(sel map[string]string) (podTemplate, bool) {
		for _, tpl := range templates {
			if len(sel) > 0 && subset(sel, tpl.Metadata.Labels) {
				return tpl, true
			}
		}
		return podTemplate{}, false
	}
	for name, s := range m.services {
		tpl, ok := selects(s.Spec.Selector)
		if !ok {
			t.Errorf("Service %s selects no pods (selector %v)", name, s.Spec.Selector)
			continue
		}
		for _, p := range s.Spec.Ports {
			if _, ok := containerPort(tpl.Spec.Containers[0], p.TargetPort); !ok {
				t.Errorf("Service %s port %s: target %q is no port of the container", name, p.Name, p.TargetPort)
			}
		}
	}
	for name, b := range m.pdbs {
		if _, ok := selects(b.Spec.Selector.MatchLabels); !ok {
			t.Errorf("PodDisruptionBudget %s selects no pods", name)
		}
		if b.Spec.MaxUnavailable != 1 {
			t.Errorf("PodDisruptionBudget %s: maxUnavailable %d, want 1", name, b.Spec.MaxUnavailable)
		}
	}
	checkBrokers(t, m)
	checkController(t, m)
}

// checkPod checks one workload's pod template.
func checkPod(t *testing.T, where string, sel labelSelector, tpl podTemplate, claims map[string]bool) {
	t.Helper()
	if len(sel.MatchLabels) == 0 || !subset(sel.MatchLabels, tpl.Metadata.Labels) {
		t.Errorf("%s: selector %v does not match the template's labels %v", where, sel.MatchLabels, tpl.Metadata.Labels)
	}
	volumes := map[string]bool{}
	for _, v := range tpl.Spec.Volumes {
		volumes[v.Name] = true
	}
	for n := range claims {
		volumes[n] = true
	}
	for _, c := range tpl.Spec.Containers {
		cw := where + " container " + c.Name
		if c.Image == "" {
			t.Errorf("%s: no image", cw)
		}
		for _, vm := range c.VolumeMounts {
			if !volumes[vm.Name] {
				t.Errorf("%s mounts %q: no such volume or claim template", cw, vm.Name)
			}
		}
		if c.ReadinessProbe == nil || c.LivenessProbe == nil {
			t.Errorf("%s: want a readiness and a liveness probe", cw)
		}
		for kind, p := range map[string]*probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
			if p == nil {
				continue
			}
			var port string
			switch {
			case p.GRPC != nil:
				port = strconv.Itoa(p.GRPC.Port)
			case p.HTTPGet != nil:
				port = p.HTTPGet.Port
			default:
				t.Errorf("%s %s probe: neither grpc nor httpGet", cw, kind)
				continue
			}
			if _, ok := containerPort(c, port); !ok {
				t.Errorf("%s %s probe on port %s, which the container does not open", cw, kind, port)
			}
			if p.PeriodSeconds <= 0 || p.FailureThreshold <= 0 {
				t.Errorf("%s %s probe: period %d, failure threshold %d", cw, kind, p.PeriodSeconds, p.FailureThreshold)
			}
		}
		// $(VAR) in args must name an env var of the container, or
		// Kubernetes leaves the text as it is.
		for _, a := range append(slices.Clone(c.Command), c.Args...) {
			for _, ref := range envRef.FindAllStringSubmatch(a, -1) {
				if !slices.ContainsFunc(c.Env, func(e envVar) bool { return e.Name == ref[1] }) {
					t.Errorf("%s: argument %q uses $(%s), not in its env", cw, a, ref[1])
				}
			}
		}
	}
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func subset(sub, of map[string]string) bool {
	for k, v := range sub {
		if of[k] != v {
			return false
		}
	}
	return true
}

// containerPort resolves a port by number or name among c's ports.
func containerPort(c container, port string) (int, bool) {
	for _, p := range c.Ports {
		if p.Name == port || strconv.Itoa(p.ContainerPort) == port {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// argsOf reads a container's --flag=value arguments with the real
// binary's flags.
func argsOf(t *testing.T, where string, args []string, controller bool) map[string]string {
	t.Helper()
	return parseArgs(t, where, args, daemonFlags(t, controller))
}

func checkBrokers(t *testing.T, m manifests) {
	ss := m.statefulSets["replicad"]
	c := ss.Spec.Template.Spec.Containers[0]
	args := argsOf(t, "broker", c.Args, false)
	_, port, _ := net.SplitHostPort(args["listen"])
	if _, ok := containerPort(c, port); !ok {
		t.Errorf("broker --listen %s: port not a container port", args["listen"])
	}
	if p := c.ReadinessProbe; p == nil || p.GRPC == nil || strconv.Itoa(p.GRPC.Port) != port {
		t.Errorf("broker readiness probe %+v: want grpc health on --listen's port %s", p, port)
	}
	if p := c.LivenessProbe; p == nil || p.GRPC == nil || strconv.Itoa(p.GRPC.Port) != port {
		t.Errorf("broker liveness probe %+v: want grpc health on --listen's port %s", p, port)
	}
	_, mport, _ := net.SplitHostPort(args["metrics-listen"])
	if _, ok := containerPort(c, mport); !ok || ss.Spec.Template.Metadata.Annotations["prometheus.io/port"] != mport {
		t.Errorf("broker --metrics-listen %s: not a container port, or not the scrape annotation", args["metrics-listen"])
	}
	// The id is the pod's ordinal.
	if args["id"] != "$(BROKER_ID)" {
		t.Errorf("broker --id %q, want $(BROKER_ID)", args["id"])
	}
	for _, e := range c.Env {
		if e.Name == "BROKER_ID" && (e.ValueFrom == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.labels['apps.kubernetes.io/pod-index']") {
			t.Errorf("BROKER_ID from %+v, want the pod-index label", e.ValueFrom)
		}
	}
	// Advertised: the pod's name under the headless Service, on --listen's port.
	want := "$(POD_NAME)." + ss.Spec.ServiceName + ".$(POD_NAMESPACE).svc.cluster.local:" + port
	if args["advertised-address"] != want {
		t.Errorf("broker --advertised-address %q, want %q", args["advertised-address"], want)
	}
	// Data on the claim.
	onClaim := false
	for _, vm := range c.VolumeMounts {
		for _, ct := range ss.Spec.VolumeClaimTemplates {
			if vm.Name == ct.Metadata.Name && strings.HasPrefix(args["log-dirs"]+"/", strings.TrimSuffix(vm.MountPath, "/")+"/") {
				onClaim = true
			}
		}
	}
	if !onClaim {
		t.Errorf("broker --log-dirs %q is on no volume claim: the data would die with the pod", args["log-dirs"])
	}
	// --controller is the controller Service, on a port it serves.
	host, cport, err := net.SplitHostPort(args["controller"])
	svc, ok := m.services[host]
	if err != nil || !ok || !slices.ContainsFunc(svc.Spec.Ports, func(p servicePort) bool { return strconv.Itoa(p.Port) == cport }) {
		t.Errorf("broker --controller %q: not a Service and one of its ports", args["controller"])
	}
	// acks=all stays writable with the PDB's maxUnavailable brokers away.
	isr, _ := strconv.Atoi(args["min-insync-replicas"])
	if isr > ss.Spec.Replicas-m.pdbs["replicad"].Spec.MaxUnavailable {
		t.Errorf("--min-insync-replicas %d with %d brokers and %d allowed away", isr, ss.Spec.Replicas, m.pdbs["replicad"].Spec.MaxUnavailable)
	}
	if g := ss.Spec.Template.Spec.TerminationGracePeriodSeconds; g < 70 {
		t.Errorf("broker terminationGracePeriodSeconds %d: the clean stop may take 70s", g)
	}
	if sc := ss.Spec.Template.Spec.SecurityContext; sc == nil || !sc.RunAsNonRoot || sc.RunAsUser != 65532 || sc.FSGroup != 65532 {
		t.Errorf("broker pod securityContext %+v: want non-root 65532 with fsGroup 65532 (the volume's group)", sc)
	}
	if ss.Spec.Replicas < 3 {
		t.Errorf("%d brokers", ss.Spec.Replicas)
	}
}

func checkController(t *testing.T, m manifests) {
	d := m.deployments["replicad-controller"]
	c := d.Spec.Template.Spec.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "controller" {
		t.Fatalf("controller args %q: want replicad controller ...", c.Args)
	}
	args := argsOf(t, "controller", c.Args[1:], true)
	_, port, _ := net.SplitHostPort(args["listen"])
	for kind, p := range map[string]*probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.GRPC == nil || strconv.Itoa(p.GRPC.Port) != port {
			t.Errorf("controller %s probe %+v: want grpc health on --listen's port %s", kind, p, port)
		}
	}
	// A Deployment keeps nothing: the store is etcd, every endpoint a
	// member of the etcd StatefulSet on its client port.
	rest, ok := strings.CutPrefix(args["store"], "etcd://")
	if !ok {
		t.Fatalf("controller --store %q: a Deployment has no volume, want etcd://", args["store"])
	}
	etcd := m.statefulSets["etcd"]
	etcdSvc := m.services[etcd.Spec.ServiceName]
	seen := map[string]bool{}
	for _, ep := range strings.Split(rest, ",") {
		host, p, err := net.SplitHostPort(ep)
		if err != nil {
			t.Errorf("--store endpoint %q: %v", ep, err)
			continue
		}
		var ord int
		if _, err := fmt.Sscanf(host, "etcd-%d."+etcd.Spec.ServiceName, &ord); err != nil || ord >= etcd.Spec.Replicas ||
			host != fmt.Sprintf("etcd-%d.%s", ord, etcd.Spec.ServiceName) {
			t.Errorf("--store endpoint %q names no pod of the etcd StatefulSet (%d replicas, service %s)", ep, etcd.Spec.Replicas, etcd.Spec.ServiceName)
		}
		if !slices.ContainsFunc(etcdSvc.Spec.Ports, func(sp servicePort) bool { return sp.Name == "client" && strconv.Itoa(sp.Port) == p }) {
			t.Errorf("--store endpoint %q: not etcd's client port", ep)
		}
		seen[host] = true
	}
	if len(seen) != etcd.Spec.Replicas {
		t.Errorf("--store names %d etcd members of %d", len(seen), etcd.Spec.Replicas)
	}
	// The controller Service routes to --listen's port.
	svc := m.services["replicad-controller"]
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("controller Service ports %+v", svc.Spec.Ports)
	}
	if got, _ := containerPort(c, svc.Spec.Ports[0].TargetPort); strconv.Itoa(got) != port {
		t.Errorf("controller Service targets port %d, the controller listens on %s", got, port)
	}
	if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != "RollingUpdate" || ru.MaxUnavailable != 0 || ru.MaxSurge < 1 {
		t.Errorf("controller strategy %+v: want the new pod up (a standby) before the old one stops", d.Spec.Strategy)
	}
}
