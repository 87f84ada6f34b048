package version

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Unknown stands for a field the build info does not hold.
const Unknown = "unknown"

// Info describes one build. The JSON names follow the protojson casing the
// rest of ctlclient's -o json output uses.
type Info struct {
	// Version is the main module's version: a tag (v1.2.3), a
	// pseudo-version (v0.0.0-20261202063426-eae50bb1c3d2, +dirty when
	// modified), or Unknown for "(devel)" builds.
	Version string `json:"version"`
	// Commit is the full VCS revision, Unknown when not recorded.
	Commit string `json:"commit"`
	// Date is the commit's time (vcs.time, RFC 3339, UTC): the build is
	// reproducible, so the commit time is the meaningful "build date".
	Date string `json:"date"`
	// Modified: the tree had uncommitted changes when built.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Link-time fallbacks, set by make build with -ldflags -X (see the
// Makefile's VERSION_LDFLAGS) for the fields the build info lacks. Go stamps
// nothing in a git worktree (cmd/go takes a .git *directory* as the mark of a
// repository, and a worktree's .git is a file), with -buildvcs=false, or
// from a source tarball.
var (
	linkVersion  string
	linkCommit   string
	linkDate     string
	linkModified string // "true" or "false"
)

// Get reads the running binary's build info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return withLinkFallbacks(FromBuildInfo(bi), linkVersion, linkCommit, linkDate, linkModified)
}

// withLinkFallbacks fills the fields info lacks from the -X values. A commit
// from the build info wins, with its date and modified bit: the two sources
// are never mixed for one commit.
func withLinkFallbacks(info Info, ver, commit, date, modified string) Info {
	if info.Version == Unknown && ver != "" {
		info.Version = ver
	}
	if info.Commit == Unknown && commit != "" {
		info.Commit = commit
		if date != "" {
			info.Date = date
		}
		info.Modified = modified == "true"
	}
	return info
}

// FromBuildInfo extracts an Info from bi (nil: nothing recorded).
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: Unknown, Commit: Unknown, Date: Unknown, GoVersion: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return info
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		info.Version = v
	}
	var goos, goarch string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.Date = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	if goos != "" && goarch != "" {
		info.Platform = goos + "/" + goarch
	}
	return info
}

// ShortCommit is the first 12 hex digits of the commit, as git abbreviates.
func (i Info) ShortCommit() string {
	if len(i.Commit) > 12 {
		return i.Commit[:12]
	}
	return i.Commit
}

// String is the one-line form: "PROG VERSION (commit C, built DATE, GO PLATFORM)",
// with ", modified" when the tree was dirty.
func (i Info) String(prog string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (commit %s", prog, i.Version, i.ShortCommit())
	if i.Modified {
		b.WriteString(", modified")
	}
	fmt.Fprintf(&b, ", built %s, %s %s)", i.Date, i.GoVersion, i.Platform)
	return b.String()
}

// JSON is the -o json form: one object, every field present.
func (i Info) JSON() []byte {
	b, _ := json.MarshalIndent(i, "", "  ")
	return append(b, '\n')
}
