package testutil

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// Binaries are the paths of the built commands.
type Binaries struct {
	Replicad  string
	Ctlclient string
}

// BuildBinaries builds cmd/replicad and cmd/ctlclient into dir. With race
// the binaries carry the race detector, so races inside the broker fail the
// process (exit 66) and with it the test.
func BuildBinaries(dir string, race bool) (Binaries, error) {
	root, err := moduleRoot()
	if err != nil {
		return Binaries{}, err
	}
	bins := Binaries{Replicad: filepath.Join(dir, "replicad"), Ctlclient: filepath.Join(dir, "ctlclient")}
	args := []string{"build"}
	if race {
		args = append(args, "-race")
	}
	for pkg, out := range map[string]string{"./cmd/replicad": bins.Replicad, "./cmd/ctlclient": bins.Ctlclient} {
		cmd := exec.Command("go", append(args, "-o", out, pkg)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return Binaries{}, fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
		}
	}
	return bins, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == "/dev/null" {
		return "", fmt.Errorf("not inside the replicad module")
	}
	return filepath.Dir(gomod), nil
}
