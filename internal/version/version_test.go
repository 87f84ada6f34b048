package version

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/replicad/replicad", Version: "v0.0.0-20261202063426-eae50bb1c3d2+dirty"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "eae50bb1c3d2a5b8f0e1d2c3b4a5968778695a4b"},
			{Key: "vcs.time", Value: "2026-12-02T06:34:26Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	got := FromBuildInfo(bi)
	want := Info{Version: "v0.0.0-20261202063426-eae50bb1c3d2+dirty", Commit: "eae50bb1c3d2a5b8f0e1d2c3b4a5968778695a4b",
		Date: "2026-12-02T06:34:26Z", Modified: true, GoVersion: "go1.26.8", Platform: "linux/arm64"}
	if got != want {
		t.Fatalf("FromBuildInfo:\n got %+v\nwant %+v", got, want)
	}
	line := got.String("replicad")
	wantLine := "replicad v0.0.0-20261202063426-eae50bb1c3d2+dirty (commit eae50bb1c3d2, modified, built 2026-12-02T06:34:26Z, go1.26.8 linux/arm64)"
	if line != wantLine {
		t.Fatalf("String:\n got %q\nwant %q", line, wantLine)
	}
}

// A build without VCS stamping (-buildvcs=false, a tarball) says "unknown"
// rather than printing empty fields or "(devel)".
func TestFromBuildInfoWithoutVCS(t *testing.T) {
	got := FromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}})
	if got.Version != Unknown || got.Commit != Unknown || got.Date != Unknown || got.Modified {
		t.Fatalf("got %+v, want unknown version, commit and date", got)
	}
	if got.GoVersion != "go1.26.8" || got.Platform == "" {
		t.Fatalf("got %+v, want the Go version and a platform", got)
	}
	if s := got.String("ctlclient"); !strings.HasPrefix(s, "ctlclient unknown (commit unknown, built unknown, go1.26.8 ") {
		t.Fatalf("String = %q", s)
	}
	if got := FromBuildInfo(nil); got.Version != Unknown || got.Commit != Unknown {
		t.Fatalf("nil build info: %+v", got)
	}
}

// The JSON form holds every field, zero values included (modified: false),
// so a jq filter on any of them works.
func TestJSONHasEveryField(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(FromBuildInfo(nil).JSON(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "commit", "date", "modified", "goVersion", "platform"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %v", k, m)
		}
	}
	if m["modified"] != false {
		t.Errorf("modified = %v, want false", m["modified"])
	}
}

// The -ldflags -X values fill only what the build info lacks.
func TestLinkFallbacks(t *testing.T) {
	bare := FromBuildInfo(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}})
	got := withLinkFallbacks(bare, "v0.1.0-3-gabc", "abc123", "2026-12-02T06:00:00Z", "true")
	if got.Version != "v0.1.0-3-gabc" || got.Commit != "abc123" || got.Date != "2026-12-02T06:00:00Z" || !got.Modified {
		t.Fatalf("fallbacks not applied: %+v", got)
	}
	stamped := FromBuildInfo(&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "fromgo"}, {Key: "vcs.time", Value: "2026-01-01T00:00:00Z"}}})
	got = withLinkFallbacks(stamped, "v9", "fromldflags", "2027-01-01T00:00:00Z", "true")
	if got.Version != "v1.2.3" || got.Commit != "fromgo" || got.Date != "2026-01-01T00:00:00Z" || got.Modified {
		t.Fatalf("build info overridden by the fallbacks: %+v", got)
	}
}
