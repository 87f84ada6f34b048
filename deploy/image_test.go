package deploy

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// repoRoot is the module's directory (the tests run in deploy/).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// imageConfig is the part of a docker-format image config the test reads.
type imageConfig struct {
	Config struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		WorkingDir   string
		Volumes      map[string]struct{}
		ExposedPorts map[string]struct{}
		Labels       map[string]string
		Healthcheck  *struct {
			Test     []string
			Interval time.Duration
		}
	} `json:"config"`
}

// TestImage builds the image with podman (make image), unpacks it with
// podman save, and checks what a container of it would get: the entrypoint
// answers --version from the rootfs, the binaries are static, the user is
// not root, the data volume is the user's, and the health check's probe
// sees the rootfs's broker and controller SERVING. Set REPLICAD_IMAGE_TEST=1
// (make image-test): it takes a minute or more.
func TestImage(t *testing.T) {
	if os.Getenv("REPLICAD_IMAGE_TEST") == "" {
		t.Skip("set REPLICAD_IMAGE_TEST=1 (make image-test) to build the image with podman")
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Skip("podman not installed (apt-get install -y podman, or make image-test as root)")
	}
	if out, err := exec.Command(podman, "info").CombinedOutput(); err != nil {
		t.Skipf("podman cannot run here: %v\n%s", err, out)
	}
	root := repoRoot(t)
	image := fmt.Sprintf("localhost/replicad:imagetest-%d", os.Getpid())
	make := exec.Command("make", "image", "IMAGE="+image, "CONTAINER_TOOL="+podman)
	make.Dir = root
	start := time.Now()
	if out, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Logf("make image took %v", time.Since(start).Round(time.Second))
	t.Cleanup(func() { exec.Command(podman, "rmi", "-f", image).Run() })

	archive := filepath.Join(t.TempDir(), "image.tar")
	if out, err := exec.Command(podman, "save", "--format", "docker-archive", "-o", archive, image).CombinedOutput(); err != nil {
		t.Fatalf("podman save: %v\n%s", err, out)
	}
	rootfs := t.TempDir()
	cfg, owners := unpackImage(t, archive, rootfs)

	c := cfg.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want the non-root 65532:65532", c.User)
	}
	if _, ok := c.Volumes["/var/lib/replicad"]; !ok {
		t.Errorf("volumes %v lack /var/lib/replicad", c.Volumes)
	}
	if owners["var/lib/replicad"] != 65532 {
		t.Errorf("/var/lib/replicad owned by uid %d, want 65532 (the user must write its volume)", owners["var/lib/replicad"])
	}
	if len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/replicad" {
		t.Fatalf("entrypoint %v", c.Entrypoint)
	}
	if c.Healthcheck == nil || len(c.Healthcheck.Test) < 2 || c.Healthcheck.Test[0] != "CMD" {
		t.Fatalf("health check %+v: want CMD grpc-health-probe", c.Healthcheck)
	}
	probe := filepath.Join(rootfs, c.Healthcheck.Test[1])
	if c.Labels["org.opencontainers.image.licenses"] != "Apache-2.0" {
		t.Errorf("labels %v", c.Labels)
	}
	if head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output(); err == nil &&
		c.Labels["org.opencontainers.image.revision"] != strings.TrimSpace(string(head)) {
		t.Errorf("revision label %q, want HEAD %s", c.Labels["org.opencontainers.image.revision"], head)
	}
	passwd, err := os.ReadFile(filepath.Join(rootfs, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), "replicad:x:65532:65532:") {
		t.Errorf("/etc/passwd: %v\n%s", err, passwd)
	}
	for _, bin := range []string{"replicad", "ctlclient", "grpc-health-probe"} {
		checkStatic(t, filepath.Join(rootfs, "usr/local/bin", bin))
	}

	entry := filepath.Join(rootfs, c.Entrypoint[0])
	out, err := exec.Command(entry, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "replicad ") || strings.Contains(string(out), "commit unknown") {
		t.Fatalf("%s --version: %v %q (want the version and the commit)", c.Entrypoint[0], err, out)
	}
	t.Logf("entrypoint --version: %s", strings.TrimSpace(string(out)))

	// The probe of the health check against the image's own daemons.
	broker := testutil.StartBroker(t, entry, testutil.BrokerOptions{ID: 1, LogDirs: []string{t.TempDir()}})
	expectServing(t, probe, broker.Addr)
	ctl := testutil.StartServerController(t, entry, nil, "--listen", "127.0.0.1:0", "--store", t.TempDir())
	expectServing(t, probe, ctl.Addr)
	if code := broker.Terminate(30 * time.Second); code != 0 {
		t.Errorf("broker from the image exited %d on SIGTERM", code)
	}
	if code := ctl.Terminate(30 * time.Second); code != 0 {
		t.Errorf("controller from the image exited %d on SIGTERM", code)
	}
}

func expectServing(t *testing.T, probe, addr string) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		out, err := exec.Command(probe, "-addr="+addr, "-connect-timeout=2s", "-rpc-timeout=2s").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SERVING") {
			return fmt.Errorf("grpc-health-probe -addr=%s: %v %s", addr, err, out)
		}
		return nil
	})
}

// checkStatic fails unless the ELF file asks for no dynamic loader and no
// shared library: a FROM scratch image has neither.
func checkStatic(t *testing.T, file string) {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Errorf("%s: %v", file, err)
		return
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (PT_INTERP): build it with CGO_ENABLED=0", filepath.Base(file))
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", filepath.Base(file), libs)
	}
}

// unpackImage extracts a docker-archive (podman save) into rootfs, layer by
// layer, and returns the image config and the owner uid of every path.
func unpackImage(t *testing.T, archive, rootfs string) (imageConfig, map[string]int) {
	t.Helper()
	files := map[string][]byte{}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", archive, err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[path.Clean(h.Name)] = b
		}
	}
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, files["manifest.json"])
	}
	var cfg imageConfig
	if err := json.Unmarshal(files[path.Clean(manifest[0].Config)], &cfg); err != nil {
		t.Fatalf("image config: %v", err)
	}
	owners := map[string]int{}
	for _, layer := range manifest[0].Layers {
		b, ok := files[path.Clean(layer)]
		if !ok {
			t.Fatalf("layer %s missing from the archive", layer)
		}
		extractLayer(t, bytes.NewReader(b), rootfs, owners)
	}
	return cfg, owners
}

func extractLayer(t *testing.T, r io.Reader, rootfs string, owners map[string]int) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("layer: %v", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		if name == "." || strings.HasPrefix(name, "../") {
			continue
		}
		owners[name] = h.Uid
		dst := filepath.Join(rootfs, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, os.FileMode(h.Mode)&0o777|0o200)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			out.Close()
		case tar.TypeSymlink:
			os.MkdirAll(filepath.Dir(dst), 0o755)
			os.Symlink(h.Linkname, dst)
		}
	}
}
