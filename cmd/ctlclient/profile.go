package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Connection profiles (as `nats context` and `rpk profile`): named sets of
// addresses and TLS files in one YAML file, one of them current. The
// current profile (or CTLCLIENT_PROFILE's, or --profile's) gives the
// defaults of the global flags; the environment's CTLCLIENT_* variables and
// the flags themselves override it.

// profile is one named connection profile.
type profile struct {
	Broker     string `yaml:"broker,omitempty"`
	Controller string `yaml:"controller,omitempty"`
	Bootstrap  string `yaml:"bootstrap,omitempty"`
	TLSCert    string `yaml:"tlsCert,omitempty"`
	TLSKey     string `yaml:"tlsKey,omitempty"`
	TLSCA      string `yaml:"tlsCa,omitempty"`
}

// profileFile is the file's content.
type profileFile struct {
	Current  string              `yaml:"current,omitempty"`
	Profiles map[string]*profile `yaml:"profiles"`
}

// profilePath is where the profiles live: $CTLCLIENT_CONFIG_DIR, else
// $XDG_CONFIG_HOME/ctlclient, else ~/.config/ctlclient; profiles.yaml there.
func profilePath(getenv func(string) string) string {
	dir := getenv("CTLCLIENT_CONFIG_DIR")
	if dir == "" {
		if x := getenv("XDG_CONFIG_HOME"); x != "" {
			dir = filepath.Join(x, "ctlclient")
		} else if h := getenv("HOME"); h != "" {
			dir = filepath.Join(h, ".config", "ctlclient")
		} else {
			return ""
		}
	}
	return filepath.Join(dir, "profiles.yaml")
}

// loadProfiles reads the file; none is an empty set.
func loadProfiles(path string) (*profileFile, error) {
	pf := &profileFile{Profiles: map[string]*profile{}}
	if path == "" {
		return pf, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return pf, nil
	}
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(pf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pf.Profiles == nil {
		pf.Profiles = map[string]*profile{}
	}
	return pf, nil
}

// save writes the file atomically (a temporary file renamed over it), 0600:
// it names key files.
func (pf *profileFile) save(path string) error {
	if path == "" {
		return errors.New("no profile file: set CTLCLIENT_CONFIG_DIR or HOME")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := yaml.Marshal(pf)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// applyProfile sets g's defaults from the selected profile: --profile's or
// CTLCLIENT_PROFILE's name, else the file's current one.
func applyProfile(g *globals, getenv func(string) string, name string) error {
	pf, err := loadProfiles(profilePath(getenv))
	if err != nil {
		return err
	}
	if name == "" {
		name = pf.Current
	}
	if name == "" {
		return nil
	}
	p, ok := pf.Profiles[name]
	if !ok {
		return fmt.Errorf("profile %q does not exist (ctlclient profile list)", name)
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&g.broker, p.Broker)
	set(&g.controller, p.Controller)
	set(&g.bootstrap, p.Bootstrap)
	set(&g.tlsCert, p.TLSCert)
	set(&g.tlsKey, p.TLSKey)
	set(&g.tlsCA, p.TLSCA)
	g.profile = name
	return nil
}

// profileFlagsGiven is the profile of the global flags given explicitly,
// TLS files made absolute (a profile is used from any directory), and
// whether any was.
func profileFlagsGiven(g *globals) (*profile, bool) {
	p := &profile{}
	given := false
	take := func(flag string, dst *string, v string, path bool) {
		if !g.explicit[flag] {
			return
		}
		given = true
		if abs, err := filepath.Abs(v); path && err == nil {
			v = abs
		}
		*dst = v
	}
	take("broker", &p.Broker, g.broker, false)
	take("controller", &p.Controller, g.controller, false)
	take("bootstrap", &p.Bootstrap, g.bootstrap, false)
	take("tls-cert", &p.TLSCert, g.tlsCert, true)
	take("tls-key", &p.TLSKey, g.tlsKey, true)
	take("tls-ca", &p.TLSCA, g.tlsCA, true)
	return p, given
}

func profileCommands() []*command {
	details := `Profiles are kept in $CTLCLIENT_CONFIG_DIR/profiles.yaml (default
$XDG_CONFIG_HOME/ctlclient, else ~/.config/ctlclient), mode 0600. The
current profile (or the one --profile or CTLCLIENT_PROFILE names) gives the
defaults of --broker, --controller, --bootstrap and the --tls-* files; the
CTLCLIENT_* variables and the flags win over it.`
	return []*command{
		{
			name:    "profile create",
			summary: "save a connection profile (addresses and TLS files)",
			usage:   "NAME [--broker A] [--controller A,...] [--bootstrap A,...] [--tls-cert F --tls-key F --tls-ca F] [--use] [--force]",
			details: "Saves the global flags given with it under NAME; --use makes it current; an existing NAME\nneeds --force.\n\n" + details,
			example: "ctlclient profile create prod --controller 10.0.0.1:9090,10.0.0.2:9090 --tls-cert admin.crt --tls-key admin.key --tls-ca ca.crt --use",
			args:    true,
			local:   true,
			flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
				use := fs.Bool("use", false, "make the new profile the current one")
				force := fs.Bool("force", false, "replace a profile of that name")
				return func(_ context.Context, e *env) error {
					name, err := profileName(fs, e)
					if err != nil {
						return err
					}
					p, given := profileFlagsGiven(e.g)
					if !given {
						return usagef("give at least one of --broker, --controller, --bootstrap, --tls-cert, --tls-key, --tls-ca")
					}
					path := profilePath(e.getenv)
					pf, err := loadProfiles(path)
					if err != nil {
						return err
					}
					if _, exists := pf.Profiles[name]; exists && !*force {
						return usagef("profile %q exists: --force replaces it", name)
					}
					pf.Profiles[name] = p
					if *use || pf.Current == "" {
						pf.Current = name
					}
					if err := pf.save(path); err != nil {
						return err
					}
					fmt.Fprintf(e.stdout, "profile %s saved in %s%s\n", name, path, map[bool]string{true: " (current)"}[pf.Current == name])
					return nil
				}
			},
		},
		{
			name:    "profile use",
			summary: "make a connection profile the current one",
			usage:   "NAME",
			details: details,
			example: "ctlclient profile use prod",
			args:    true,
			local:   true,
			flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
				return func(_ context.Context, e *env) error {
					name, err := profileName(fs, e)
					if err != nil {
						return err
					}
					path := profilePath(e.getenv)
					pf, err := loadProfiles(path)
					if err != nil {
						return err
					}
					if _, ok := pf.Profiles[name]; !ok {
						return answerError{fmt.Sprintf("profile %q does not exist (have: %s)", name, strings.Join(profileNames(pf), ", "))}
					}
					pf.Current = name
					if err := pf.save(path); err != nil {
						return err
					}
					fmt.Fprintf(e.stdout, "current profile: %s\n", name)
					return nil
				}
			},
		},
		{
			name:    "profile list",
			summary: "list the connection profiles, the current one marked *",
			details: details,
			example: "ctlclient profile list",
			local:   true,
			flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
				return func(_ context.Context, e *env) error {
					pf, err := loadProfiles(profilePath(e.getenv))
					if err != nil {
						return err
					}
					t := newTable(e.stdout, "", "NAME", "BROKER", "CONTROLLER", "BOOTSTRAP", "TLS")
					for _, n := range profileNames(pf) {
						p := pf.Profiles[n]
						mark := ""
						if n == pf.Current {
							mark = "*"
						}
						tlsFiles := "-"
						if p.TLSCert != "" || p.TLSCA != "" {
							tlsFiles = strings.Trim(p.TLSCert+" "+p.TLSCA, " ")
						}
						t.row(mark, n, orDash(p.Broker), orDash(p.Controller), orDash(p.Bootstrap), tlsFiles)
					}
					return t.flush()
				}
			},
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func profileNames(pf *profileFile) []string {
	names := make([]string, 0, len(pf.Profiles))
	for n := range pf.Profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// profileName is the one NAME argument (letters, digits, '.', '_', '-'),
// the flags after it parsed too (profile create prod --broker ...), and
// counted as given.
func profileName(fs *flag.FlagSet, e *env) (string, error) {
	pos, err := interspersedArgs(fs, e.g)
	if err != nil {
		return "", err
	}
	for f := range setFlags(fs) {
		e.g.explicit[f] = true
	}
	if len(pos) != 1 {
		return "", usagef("want one profile NAME (got %d arguments)", len(pos))
	}
	name := pos[0]
	if name == "" || strings.IndexFunc(name, func(r rune) bool {
		return !(r == '.' || r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) >= 0 {
		return "", usagef("profile name %q: want letters, digits, '.', '_' or '-'", name)
	}
	return name, nil
}
