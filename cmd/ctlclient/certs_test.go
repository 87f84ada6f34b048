package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/internal/tlsconf"
)

// TestCertsInit ensures certs init writes the CA and one certificate per
// role, each naming its role, keys mode 0600, refuses to overwrite without
// --force, and that the result works: ctlclient with the admin certificate
// talks to a broker requiring mutual TLS, and without one it is refused.
func TestCertsInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	r := ctl(t, "", "", "certs", "init", "--dir", dir, "--brokers", "2", "--client-name", "app")
	wantCode(t, r, 0)
	for name, principal := range map[string]string{"controller": "spiffe://replicad/controller", "broker-1": "spiffe://replicad/broker/1",
		"broker-2": "spiffe://replicad/broker/2", "admin": "spiffe://replicad/admin", "client": "spiffe://replicad/client/app"} {
		b, err := os.ReadFile(filepath.Join(dir, name+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.URIs) != 1 || c.URIs[0].String() != principal {
			t.Errorf("%s.crt names %v, want %s", name, c.URIs, principal)
		}
		if fi, err := os.Stat(filepath.Join(dir, name+".key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.key: %v %v", name, fi.Mode(), err)
		}
		if !strings.Contains(r.stdout, filepath.Join(dir, name+".crt")) {
			t.Errorf("stdout does not list %s.crt:\n%s", name, r.stdout)
		}
	}
	r = ctl(t, "", "", "certs", "init", "--dir", dir)
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "file exists (--force overwrites)") {
		t.Fatalf("stderr %q", r.stderr)
	}
	wantCode(t, ctl(t, "", "", "certs", "init", "--dir", dir, "--force"), 0)
	wantCode(t, ctl(t, "", "", "certs", "init"), 2)

	tc, err := tlsconf.New(tlsconf.Options{Cert: filepath.Join(dir, "broker-1.crt"), Key: filepath.Join(dir, "broker-1.key"),
		CA: filepath.Join(dir, "ca.crt"), ClientAuth: tlsconf.ClientAuthRequire}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	addr := startBroker(t, newMemBroker(), tc.ServerOption())
	tlsArgs := []string{"--tls-cert", filepath.Join(dir, "admin.crt"), "--tls-key", filepath.Join(dir, "admin.key"), "--tls-ca", filepath.Join(dir, "ca.crt")}
	wantCode(t, ctl(t, addr, "", append([]string{"describe"}, tlsArgs...)...), 0)
	// The environment works as the flags do.
	wantCode(t, ctlEnv(t, addr, map[string]string{"CTLCLIENT_TLS_CERT": tlsArgs[1], "CTLCLIENT_TLS_KEY": tlsArgs[3], "CTLCLIENT_TLS_CA": tlsArgs[5]}, "describe"), 0)
	r = ctl(t, addr, "", "describe", "--tls-ca", filepath.Join(dir, "ca.crt"))
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, "requires a client certificate (mutual TLS) and ctlclient presented none") {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = ctl(t, addr, "", "describe")
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, "the broker at "+addr+" speaks TLS; ctlclient has no --tls-*") {
		t.Fatalf("stderr %q", r.stderr)
	}
	wantCode(t, ctl(t, addr, "", "describe", "--tls-cert", tlsArgs[1]), 2)
	wantCode(t, ctl(t, addr, "", "describe", "--tls-client-auth", "maybe"), 2)
}

// ctlEnv runs ctlclient in-process against broker with env as its environment.
func ctlEnv(t *testing.T, broker string, env map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "CTLCLIENT_BROKER" {
			return broker
		}
		return env[k]
	}
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut, getenv)
	return result{code, out.String(), errOut.String()}
}

// TestCertsIssue ensures certs issue signs a leaf with the CA certs init
// made, naming the identity of its role, key mode 0600, leaving ca.crt and
// ca.key byte for byte as they were; refuses to overwrite without --force,
// and says what is missing when the CA key is not there.
func TestCertsIssue(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	wantCode(t, ctl(t, "", "", "certs", "init", "--dir", dir, "--brokers", "1"), 0)
	caCrt, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	caKey, _ := os.ReadFile(filepath.Join(dir, "ca.key"))
	ca, err := tlsconf.LoadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, c := range []struct {
		args      []string
		name, uri string
	}{
		{[]string{"--name", "analytics"}, "analytics", "spiffe://replicad/client/analytics"},
		{[]string{"--name", "ops", "--role", "admin"}, "ops", "spiffe://replicad/admin"},
		{[]string{"--name", "broker-4", "--role", "broker", "--broker-id", "4", "--hosts", "b4.example,10.0.0.4"}, "broker-4", "spiffe://replicad/broker/4"},
	} {
		r := ctl(t, "", "", append([]string{"certs", "issue", "--dir", dir}, c.args...)...)
		wantCode(t, r, 0)
		b, err := os.ReadFile(filepath.Join(dir, c.name+".crt"))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if len(cert.URIs) != 1 || cert.URIs[0].String() != c.uri {
			t.Errorf("%s.crt names %v, want %s", c.name, cert.URIs, c.uri)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			t.Errorf("%s.crt does not verify against ca.crt: %v", c.name, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, c.name+".key")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.key: %v %v", c.name, fi.Mode(), err)
		}
		if c.name == "broker-4" && (len(cert.DNSNames) != 1 || cert.DNSNames[0] != "b4.example" || len(cert.IPAddresses) != 1) {
			t.Errorf("broker-4.crt hosts %v %v", cert.DNSNames, cert.IPAddresses)
		}
	}
	r := ctl(t, "", "", "certs", "issue", "--dir", dir, "--name", "analytics")
	wantCode(t, r, 2)
	wantContains(t, "stderr", r.stderr, "file exists (--force overwrites)")
	wantCode(t, ctl(t, "", "", "certs", "issue", "--dir", dir, "--name", "analytics", "--force"), 0)
	for _, bad := range [][]string{{"--name", "ca"}, {"--name", "../x"}, {"--name", "x", "--role", "boss"},
		{"--name", "x", "--role", "broker"}, {"--name", "x", "--broker-id", "2"}, {"--name", "x", "--hosts", "a,,b"}, {}} {
		wantCode(t, ctl(t, "", "", append([]string{"certs", "issue", "--dir", dir}, bad...)...), 2)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "ca.crt")); !bytes.Equal(got, caCrt) {
		t.Error("ca.crt changed")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "ca.key")); !bytes.Equal(got, caKey) {
		t.Error("ca.key changed")
	}

	// A directory with the CA certificate only: it says the key is missing.
	noKey := t.TempDir()
	if err := os.WriteFile(filepath.Join(noKey, "ca.crt"), caCrt, 0o644); err != nil {
		t.Fatal(err)
	}
	r = ctl(t, "", "", "certs", "issue", "--dir", noKey, "--name", "analytics")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, filepath.Join(noKey, "ca.key")+": no CA key", "must sit next to ca.crt")
	if _, err := os.Stat(filepath.Join(noKey, "analytics.key")); err == nil {
		t.Error("wrote a key without a CA key to sign with")
	}
}
