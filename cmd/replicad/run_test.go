package main

import (
	"io"
	"strings"
	"testing"
)

// TestPprofNeedsMetricsListen: --pprof is served on --metrics-listen, so
// one without the other is a flag error naming --pprof.
func TestPprofNeedsMetricsListen(t *testing.T) {
	if _, err := parseFlags([]string{"--pprof"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--pprof") {
		t.Fatalf("--pprof without --metrics-listen: %v", err)
	}
}
