package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Profiles hold addresses and TLS files: create saves the flags given (the
// first one, or --use, becomes current), use switches, list marks the
// current one, and a command then takes its defaults from the current
// profile, from --profile's, or from CTLCLIENT_PROFILE's, with the
// environment and the flags winning over it.
func TestProfiles(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"CTLCLIENT_CONFIG_DIR": dir}
	good := startBroker(t, newMemBroker())
	dead := deadAddr(t)

	wantCode(t, ctlEnv(t, "", env, "profile", "create", "local", "--broker", good), 0)
	wantCode(t, ctlEnv(t, "", env, "profile", "create", "other", "--broker", dead), 0)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, ca)
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, ctlEnv(t, "", env, "profile", "create", "secure", "--controller", dead, "--tls-ca", rel), 0)
	wantCode(t, ctlEnv(t, "", env, "profile", "create", "local", "--broker", dead), 2) // exists: --force
	list := ctlEnv(t, "", env, "profile", "list")
	wantCode(t, list, 0)
	fields := strings.Join(strings.Fields(list.stdout), " ")
	wantContains(t, "list", fields, "* local "+good, "other "+dead)
	if !strings.Contains(list.stdout, ca) {
		t.Errorf("the TLS file is not kept absolute:\n%s", list.stdout)
	}
	if st, err := os.Stat(filepath.Join(dir, "profiles.yaml")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("profiles.yaml: %v %v", st, err)
	}

	// The current profile's broker is the default...
	wantCode(t, ctlEnv(t, "", env, "describe"), 0)
	// ...--profile and CTLCLIENT_PROFILE pick another (whose broker is dead)...
	wantCode(t, ctlEnv(t, "", env, "--profile", "other", "--timeout", "1s", "describe"), 1)
	withEnv := map[string]string{"CTLCLIENT_CONFIG_DIR": dir, "CTLCLIENT_PROFILE": "other"}
	wantCode(t, ctlEnv(t, "", withEnv, "--timeout", "1s", "describe"), 1)
	// ...and a flag or the environment wins over the profile.
	wantCode(t, ctlEnv(t, "", withEnv, "--broker", good, "describe"), 0)
	wantCode(t, ctlEnv(t, good, withEnv, "describe"), 0) // CTLCLIENT_BROKER

	wantCode(t, ctlEnv(t, "", env, "profile", "use", "other"), 0)
	wantCode(t, ctlEnv(t, "", env, "--timeout", "1s", "describe"), 1)
	wantCode(t, ctlEnv(t, "", env, "profile", "use", "nope"), 1)
	r := ctlEnv(t, "", env, "--profile", "nope", "describe")
	wantCode(t, r, 2)
	wantContains(t, "stderr", r.stderr, `profile "nope" does not exist`)
	wantCode(t, ctlEnv(t, "", env, "profile", "create", "bad/name", "--broker", good), 2)
	wantCode(t, ctlEnv(t, "", env, "profile", "create", "empty"), 2)

	// An unknown key in the file is an error naming it, not ignored.
	if err := os.WriteFile(filepath.Join(dir, "profiles.yaml"), []byte("current: x\nprofiles:\n  x:\n    brokr: a:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = ctlEnv(t, "", env, "describe")
	wantCode(t, r, 2)
	wantContains(t, "stderr", r.stderr, "brokr")
}
