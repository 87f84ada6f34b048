package tlsconf

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/peer"

	"github.com/replicad/replicad/internal/syncbuf"
)

// pki is a test CA and a directory to write certificates in.
type pki struct {
	t   *testing.T
	ca  *CA
	dir string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := NewCA("test CA", time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{t: t, ca: ca, dir: t.TempDir()}
	writeFile(t, filepath.Join(p.dir, "ca.crt"), ca.CertPEM())
	return p
}

func (p *pki) caFile() string { return filepath.Join(p.dir, "ca.crt") }

// issue writes name.crt and name.key for leaf and returns their paths.
func (p *pki) issue(name string, leaf Leaf) (string, string) {
	p.t.Helper()
	c, k, err := p.ca.Issue(leaf)
	if err != nil {
		p.t.Fatal(err)
	}
	cert, key := filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key")
	writeFile(p.t, cert, c)
	writeFile(p.t, key, k)
	return cert, key
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// server serves grpc.health.v1 with t's credentials; principals receives
// each caller's PeerPrincipal (or its error's text).
type server struct {
	addr       string
	log        *syncbuf.Buffer
	principals chan string
}

func startServer(t *testing.T, opts Options) (*server, *TLS) {
	t.Helper()
	s := &server{log: &syncbuf.Buffer{}, principals: make(chan string, 100)}
	var tc *TLS
	if opts.Enabled() {
		var err error
		tc, err = New(opts, zerolog.New(s.log))
		if err != nil {
			t.Fatal(err)
		}
	}
	srv := grpc.NewServer(tc.ServerOption(), grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		p, err := PeerPrincipal(ctx)
		if err != nil {
			p = err.Error()
		}
		s.principals <- p
		return h(ctx, req)
	}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	s.addr = lis.Addr().String()
	return s, tc
}

func newTLS(t *testing.T, opts Options) *TLS {
	t.Helper()
	tc, err := New(opts, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// check makes one health check on a new connection to addr and returns the
// server certificate it saw.
func check(t *testing.T, addr string, tc *TLS, roles Roles) (*x509.Certificate, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, tc.DialOptions(roles)...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var p peer.Peer
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Peer(&p))
	if err != nil {
		return nil, err
	}
	if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.PeerCertificates) > 0 {
		if info.State.Version != 0x0304 {
			t.Errorf("TLS version %#x, want 1.3", info.State.Version)
		}
		return info.State.PeerCertificates[0], nil
	}
	return nil, nil
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one saying %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not say %q", err, p)
		}
	}
}

// waitLog waits up to 10s for log to hold every part.
func waitLog(t *testing.T, log *syncbuf.Buffer, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		missing := ""
		for _, p := range parts {
			if !strings.Contains(log.String(), p) {
				missing = p
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log does not say %q:\n%s", missing, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMutualTLSAndPrincipal(t *testing.T) {
	p := newPKI(t)
	sc, sk := p.issue("server", LoopbackLeaf(ControllerPrincipal, time.Hour))
	cc, ck := p.issue("client", LoopbackLeaf(BrokerPrincipal(2), time.Hour))
	srv, _ := startServer(t, Options{Cert: sc, Key: sk, CA: p.caFile(), ClientAuth: ClientAuthRequire})
	got, err := check(t, srv.addr, newTLS(t, Options{Cert: cc, Key: ck, CA: p.caFile()}), Roles{})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := Principal(got); id != ControllerPrincipal {
		t.Errorf("server certificate names %q, want %q", id, ControllerPrincipal)
	}
	if id := <-srv.principals; id != BrokerPrincipal(2) {
		t.Errorf("PeerPrincipal %q, want %q", id, BrokerPrincipal(2))
	}
	// By name too: the certificate carries localhost.
	if _, err := check(t, "localhost:"+strings.Split(srv.addr, ":")[1], newTLS(t, Options{Cert: cc, Key: ck, CA: p.caFile()}), Roles{}); err != nil {
		t.Fatalf("dial localhost: %v", err)
	}
	<-srv.principals

	// --tls-client-auth request: a client without a certificate is served,
	// and names nobody.
	srv2, _ := startServer(t, Options{Cert: sc, Key: sk, CA: p.caFile(), ClientAuth: ClientAuthRequest})
	if _, err := check(t, srv2.addr, newTLS(t, Options{CA: p.caFile()}), Roles{}); err != nil {
		t.Fatal(err)
	}
	if id := <-srv2.principals; id != ErrNoPeerCertificate.Error() {
		t.Errorf("PeerPrincipal of a client without certificate: %q", id)
	}
}

func TestRotation(t *testing.T) {
	p := newPKI(t)
	sc, sk := p.issue("server", LoopbackLeaf(BrokerPrincipal(1), time.Hour))
	srv, _ := startServer(t, Options{Cert: sc, Key: sk, CA: p.caFile(), ReloadInterval: -1})
	client := newTLS(t, Options{CA: p.caFile(), ReloadInterval: -1})
	first, err := check(t, srv.addr, client, Roles{})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := Principal(first); id != BrokerPrincipal(1) {
		t.Fatalf("first handshake presents %q", id)
	}

	// Replace the pair: the next handshake presents the new certificate.
	p.issue("server", LoopbackLeaf(BrokerPrincipal(7), time.Hour))
	second, err := check(t, srv.addr, client, Roles{})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := Principal(second); id != BrokerPrincipal(7) {
		t.Fatalf("after rotation the server presents %q, want %q", id, BrokerPrincipal(7))
	}
	if !strings.Contains(srv.log.String(), "reloaded") {
		t.Errorf("no reload logged:\n%s", srv.log)
	}

	// A broken key: the last good pair stays, and the failure is logged.
	writeFile(t, sk, []byte("not a key"))
	third, err := check(t, srv.addr, client, Roles{})
	if err != nil {
		t.Fatal(err)
	}
	if !third.Equal(second) {
		t.Fatalf("a failed reload replaced the certificate")
	}
	if !strings.Contains(srv.log.String(), "cannot be loaded: keeping the previous certificate") {
		t.Errorf("failed reload not logged:\n%s", srv.log)
	}

	// A new CA on both sides: the client picks it up for its next connection.
	ca2, err := NewCA("second CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p.ca = ca2
	p.issue("server", LoopbackLeaf(BrokerPrincipal(8), time.Hour))
	if _, err := check(t, srv.addr, client, Roles{}); err == nil {
		t.Fatal("a certificate of the new CA was trusted before the CA file changed")
	}
	writeFile(t, p.caFile(), ca2.CertPEM())
	fourth, err := check(t, srv.addr, client, Roles{})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := Principal(fourth); id != BrokerPrincipal(8) {
		t.Fatalf("after the CA rotation the server presents %q", id)
	}
}

// The reload interval bounds how often the files are looked at.
func TestReloadInterval(t *testing.T) {
	p := newPKI(t)
	sc, sk := p.issue("server", LoopbackLeaf(BrokerPrincipal(1), time.Hour))
	tc := newTLS(t, Options{Cert: sc, Key: sk, ReloadInterval: time.Hour})
	now := time.Now()
	tc.now = func() time.Time { return now }
	before := tc.certificate()
	p.issue("server", LoopbackLeaf(BrokerPrincipal(2), time.Hour))
	if tc.certificate() != before {
		t.Fatal("reloaded before the interval passed")
	}
	now = now.Add(time.Hour)
	if tc.certificate() == before {
		t.Fatal("not reloaded once the interval passed")
	}
}

func TestServerCertificateRefused(t *testing.T) {
	p := newPKI(t)
	other, err := NewCA("other CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired := LoopbackLeaf(BrokerPrincipal(1), time.Hour)
	expired.NotBefore, expired.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	future := LoopbackLeaf(BrokerPrincipal(1), time.Hour)
	future.NotBefore, future.NotAfter = time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)
	wrongHost := LoopbackLeaf(BrokerPrincipal(1), time.Hour)
	wrongHost.DNS, wrongHost.IPs = []string{"broker1.example"}, []net.IP{net.IPv4(10, 1, 2, 3)}

	for _, tc := range []struct {
		name  string
		leaf  Leaf
		ca    *CA
		parts []string
	}{
		{"expired", expired, nil, []string{"the certificate of the leader at 127.0.0.1:", "has expired: valid until"}},
		{"not yet valid", future, nil, []string{"is not valid yet: valid from"}},
		{"wrong CA", LoopbackLeaf(BrokerPrincipal(1), time.Hour), other, []string{"signed by an unknown CA", "CN=other CA", "--tls-ca " + p.caFile()}},
		{"wrong host", wrongHost, nil, []string{"is not valid for host 127.0.0.1: it names broker1.example, 10.1.2.3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			issuer := p.ca
			if tc.ca != nil {
				issuer = tc.ca
			}
			c, k, err := issuer.Issue(tc.leaf)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cert, key := filepath.Join(dir, "s.crt"), filepath.Join(dir, "s.key")
			writeFile(t, cert, c)
			writeFile(t, key, k)
			srv, _ := startServer(t, Options{Cert: cert, Key: key})
			_, err = check(t, srv.addr, newTLS(t, Options{CA: p.caFile()}), Roles{Peer: "leader"})
			wantErr(t, err, tc.parts...)
			if IsMismatch(err) {
				t.Errorf("a certificate error taken for a TLS/plaintext mismatch: %v", err)
			}
		})
	}
}

func TestClientCertificateRefused(t *testing.T) {
	p := newPKI(t)
	sc, sk := p.issue("server", LoopbackLeaf(ControllerPrincipal, time.Hour))
	srv, _ := startServer(t, Options{Cert: sc, Key: sk, CA: p.caFile(), ClientAuth: ClientAuthRequire})
	other, err := NewCA("other CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	expired := LoopbackLeaf(BrokerPrincipal(1), time.Hour)
	expired.NotBefore, expired.NotAfter = time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)

	for _, tc := range []struct {
		name                   string
		leaf                   *Leaf
		ca                     *CA
		clientParts, logsParts []string
	}{
		{"none", nil, nil, []string{"the controller at 127.0.0.1:", "requires a client certificate (mutual TLS) and this broker presented none"},
			[]string{"presented no certificate, and --tls-client-auth require asks for one"}},
		{"expired", &expired, nil, []string{"refused the certificate of this broker: it has expired or is not valid yet"},
			[]string{"the client certificate (spiffe://replicad/broker/1) has expired"}},
		{"wrong CA", func() *Leaf { l := LoopbackLeaf(BrokerPrincipal(1), time.Hour); return &l }(), other,
			[]string{"refused the certificate of this broker: it is not signed by a CA that server trusts"},
			[]string{"signed by an unknown CA", "in this server's --tls-ca"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{CA: p.caFile()}
			if tc.leaf != nil {
				issuer := p.ca
				if tc.ca != nil {
					issuer = tc.ca
				}
				c, k, err := issuer.Issue(*tc.leaf)
				if err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				opts.Cert, opts.Key = filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key")
				writeFile(t, opts.Cert, c)
				writeFile(t, opts.Key, k)
			}
			srv.log.Take()
			_, err := check(t, srv.addr, newTLS(t, opts), Roles{Peer: "controller", Self: "this broker"})
			wantErr(t, err, tc.clientParts...)
			// The server logs once it has closed the connection.
			waitLog(t, srv.log, append(tc.logsParts, "refused a TLS handshake")...)
		})
	}
}

func TestPlaintextMismatch(t *testing.T) {
	p := newPKI(t)
	sc, sk := p.issue("server", LoopbackLeaf(ControllerPrincipal, time.Hour))
	tlsSrv, _ := startServer(t, Options{Cert: sc, Key: sk, CA: p.caFile()})
	plainSrv, _ := startServer(t, Options{})
	roles := Roles{Peer: "controller", Self: "this broker"}

	// A plaintext client of a TLS server.
	_, err := check(t, tlsSrv.addr, nil, roles)
	wantErr(t, err, "the controller at "+tlsSrv.addr+" speaks TLS; this broker has no --tls-*")
	if !IsMismatch(err) {
		t.Errorf("IsMismatch(%v) = false", err)
	}
	waitLog(t, tlsSrv.log, "the client does not speak TLS")
	// A TLS client of a plaintext server.
	_, err = check(t, plainSrv.addr, newTLS(t, Options{CA: p.caFile()}), roles)
	wantErr(t, err, "the controller at "+plainSrv.addr+" does not speak TLS", "but this broker has --tls-* set")
	if !IsMismatch(err) {
		t.Errorf("IsMismatch(%v) = false", err)
	}
	// Plaintext both ways still works, and a plaintext failure against a
	// plaintext server is no mismatch.
	if _, err := check(t, plainSrv.addr, nil, roles); err != nil {
		t.Fatal(err)
	}
	dead := plainSrv.addr
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	dead = lis.Addr().String()
	lis.Close()
	if _, err := check(t, dead, nil, roles); err == nil || IsMismatch(err) {
		t.Errorf("nobody listening: %v", err)
	}
}

func TestOptions(t *testing.T) {
	for s, want := range map[string]ClientAuth{"": ClientAuthNone, "none": ClientAuthNone, "request": ClientAuthRequest, "require": ClientAuthRequire} {
		if got, err := ParseClientAuth(s); err != nil || got != want {
			t.Errorf("ParseClientAuth(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseClientAuth("yes"); err == nil {
		t.Error("ParseClientAuth(yes) took it")
	}
	for _, o := range []Options{{Cert: "c"}, {Key: "k"}, {CA: "ca", ClientAuth: ClientAuthRequire}, {Cert: "c", Key: "k", ClientAuth: ClientAuthRequest}} {
		if o.Validate() == nil {
			t.Errorf("Validate(%+v) took it", o)
		}
	}
	if tc, err := New(Options{}, zerolog.Nop()); tc != nil || err != nil {
		t.Errorf("New(no files) = %v, %v; want plaintext", tc, err)
	}
	if _, err := New(Options{Cert: "/nonexistent.crt", Key: "/nonexistent.key"}, zerolog.Nop()); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("New with missing files: %v", err)
	}
}

func TestWriteDevCerts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	files, err := WriteDevCerts(DevCertsOptions{Dir: dir, Brokers: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ca.crt", "ca.key", "controller.crt", "controller.key", "broker-1.crt", "broker-1.key", "broker-2.crt", "broker-2.key",
		"admin.crt", "admin.key", "client.crt", "client.key"}
	if len(files) != len(want) {
		t.Fatalf("wrote %v, want %v", files, want)
	}
	pool := x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.crt"))
	pool.AppendCertsFromPEM(caPEM)
	principals := map[string]string{"controller": ControllerPrincipal, "broker-1": BrokerPrincipal(1), "broker-2": BrokerPrincipal(2),
		"admin": AdminPrincipal, "client": ClientPrincipal("default")}
	for name, principal := range principals {
		fi, err := os.Stat(filepath.Join(dir, name+".key"))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s.key mode %v, want 0600", name, fi.Mode().Perm())
		}
		b, _ := os.ReadFile(filepath.Join(dir, name+".crt"))
		blk, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if id, _ := Principal(c); id != principal {
			t.Errorf("%s names %q, want %q", name, id, principal)
		}
		for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
			if _, err := c.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("%s for %s: %v", name, host, err)
			}
		}
	}
	if fi, _ := os.Stat(filepath.Join(dir, "ca.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode %v", fi.Mode().Perm())
	}
	if _, err := WriteDevCerts(DevCertsOptions{Dir: dir, Brokers: 2}); !errors.Is(err, ErrExists) {
		t.Errorf("second run without force: %v", err)
	}
	if _, err := WriteDevCerts(DevCertsOptions{Dir: dir, Brokers: 3, Force: true}); err != nil {
		t.Errorf("with force: %v", err)
	}
	// The files make a working mutual TLS pair.
	srv, _ := startServer(t, Options{Cert: filepath.Join(dir, "controller.crt"), Key: filepath.Join(dir, "controller.key"),
		CA: filepath.Join(dir, "ca.crt"), ClientAuth: ClientAuthRequire})
	if _, err := check(t, srv.addr, newTLS(t, Options{Cert: filepath.Join(dir, "broker-3.crt"), Key: filepath.Join(dir, "broker-3.key"),
		CA: filepath.Join(dir, "ca.crt")}), Roles{}); err != nil {
		t.Fatal(err)
	}
	if id := <-srv.principals; id != BrokerPrincipal(3) {
		t.Errorf("principal %q", id)
	}
}
