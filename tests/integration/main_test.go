package integration

import (
	"fmt"
	"os"
	"testing"

	"github.com/replicad/replicad/internal/testutil"
)

// bins are built once for every test of the package.
var bins testutil.Binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "replicad-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins, err = testutil.BuildBinaries(dir, raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
