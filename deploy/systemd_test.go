package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var units = []string{"replicad.service", "replicad-controller.service"}

// TestSystemdUnits runs systemd-analyze verify on the units, in a root
// holding the system's own units and the real binary at the ExecStart path,
// and fails on any complaint (verify exits 0 on an unparsable value, so its
// output must be empty too). It then checks what the units promise:
// Type=notify, Restart=on-failure, the descriptor limits, a stop timeout
// longer than the broker's clean stop, and an ExecStart whose flags exist.
func TestSystemdUnits(t *testing.T) {
	analyze := systemdAnalyze(t)
	root := t.TempDir()
	var system string
	for _, d := range []string{"/usr/lib/systemd/system", "/lib/systemd/system"} {
		if _, err := os.Stat(filepath.Join(d, "sysinit.target")); err == nil {
			system = d
			break
		}
	}
	if system == "" {
		t.Skip("no systemd unit directory with sysinit.target: systemd-analyze verify needs the system's units")
	}
	copyTree(t, system, filepath.Join(root, "usr/lib/systemd/system"))
	bin := filepath.Join(root, "usr/local/bin/replicad")
	copyFile(t, replicadBin(t), bin, 0o755)
	var paths []string
	for _, u := range units {
		dst := filepath.Join(root, "etc/systemd/system", u)
		copyFile(t, filepath.Join("systemd", u), dst, 0o644)
		paths = append(paths, dst)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--root=" + root, "--man=no"}, paths...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}

	brokerFlags, ctlFlags := daemonFlags(t, false), daemonFlags(t, true)
	for _, u := range units {
		s := readUnit(t, filepath.Join("systemd", u))
		for key, want := range map[string]string{"Type": "notify", "NotifyAccess": "main", "Restart": "on-failure", "User": "replicad", "KillSignal": "SIGTERM"} {
			if got := s["Service."+key]; got != want {
				t.Errorf("%s: %s=%q, want %q", u, key, got, want)
			}
		}
		fields := strings.Fields(s["Service.ExecStart"])
		if len(fields) == 0 || fields[0] != "/usr/local/bin/replicad" {
			t.Fatalf("%s: ExecStart %q", u, s["Service.ExecStart"])
		}
		nofile, err := strconv.Atoi(s["Service.LimitNOFILE"])
		if err != nil {
			t.Fatalf("%s: LimitNOFILE %q", u, s["Service.LimitNOFILE"])
		}
		stop, err := time.ParseDuration(s["Service.TimeoutStopSec"])
		if err != nil {
			t.Fatalf("%s: TimeoutStopSec %q", u, s["Service.TimeoutStopSec"])
		}
		args := fields[1:]
		known := brokerFlags
		if u == "replicad-controller.service" {
			if len(args) == 0 || args[0] != "controller" {
				t.Fatalf("%s: ExecStart %q: want replicad controller ...", u, s["Service.ExecStart"])
			}
			args, known = args[1:], ctlFlags
		} else {
			// 2 descriptors a segment: 10,000 replicas of 20 segments.
			if nofile < 400_000 {
				t.Errorf("%s: LimitNOFILE=%d, below 10,000 replicas x 20 segments x 2", u, nofile)
			}
			// Controlled shutdown 30s + graceful stop 10s + replica manager 30s.
			if stop < 70*time.Second {
				t.Errorf("%s: TimeoutStopSec=%v: a clean stop may take 70s; systemd would SIGKILL it", u, stop)
			}
		}
		if nofile < 65536 {
			t.Errorf("%s: LimitNOFILE=%d", u, nofile)
		}
		flags := parseArgs(t, u, args, known)
		if flags["config"] == "" || !strings.HasPrefix(flags["config"], "/etc/replicad/") || s["Service.ConfigurationDirectory"] != "replicad" {
			t.Errorf("%s: --config %q, ConfigurationDirectory %q", u, flags["config"], s["Service.ConfigurationDirectory"])
		}
		if s["Service.StateDirectory"] != "replicad" || s["Service.WorkingDirectory"] != "/var/lib/replicad" {
			t.Errorf("%s: StateDirectory %q WorkingDirectory %q", u, s["Service.StateDirectory"], s["Service.WorkingDirectory"])
		}
	}
	if b, err := os.ReadFile("systemd/replicad.sysusers.conf"); err != nil || !strings.Contains(string(b), "u replicad ") {
		t.Errorf("replicad.sysusers.conf: %v %s", err, b)
	}
}

// systemdAnalyze finds systemd-analyze, installing systemd as root when it
// is missing; it skips the test when that cannot be done.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("systemd-analyze"); err == nil {
		return p
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("apt-get", "install", "-y", "systemd").CombinedOutput(); err != nil {
			t.Logf("apt-get install systemd: %v\n%s", err, out)
		}
		if p, err := exec.LookPath("systemd-analyze"); err == nil {
			return p
		}
	}
	t.Skip("systemd-analyze not found and systemd cannot be installed here (apt-get install -y systemd as root)")
	return ""
}

// readUnit reads a unit file into Section.Key -> value (the last one wins,
// as for systemd's single-valued keys).
func readUnit(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not KEY=VALUE", path, line)
			}
			out[section+"."+strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}

// copyTree copies a directory of unit files, symlinks kept as symlinks.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case fi.IsDir():
			return os.MkdirAll(target, 0o755)
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, fi.Mode().Perm())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}
