package integration

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
	"github.com/replicad/replicad/internal/tlsconf"
)

// devCerts runs `ctlclient certs init` into a new directory for brokers
// 1..3 and returns it.
func devCerts(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	runCtlclient(t, nil, "", "certs", "init", "--dir", dir, "--brokers", "3").want(t, 0)
	return dir
}

// tlsFlags are the --tls-* flags of the certificate name in dir (no name:
// the CA only), with clientAuth unless empty.
func tlsFlags(dir, name, clientAuth string) []string {
	args := []string{"--tls-ca", filepath.Join(dir, "ca.crt")}
	if name != "" {
		args = append(args, "--tls-cert", filepath.Join(dir, name+".crt"), "--tls-key", filepath.Join(dir, name+".key"))
	}
	if clientAuth != "" {
		args = append(args, "--tls-client-auth", clientAuth)
	}
	return args
}

// testTLS is the test's own credentials: the admin certificate of dir.
func testTLS(t *testing.T, dir string) []grpc.DialOption {
	t.Helper()
	tc, err := tlsconf.New(tlsconf.Options{Cert: filepath.Join(dir, "admin.crt"), Key: filepath.Join(dir, "admin.key"),
		CA: filepath.Join(dir, "ca.crt")}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	return tc.DialOptions(tlsconf.Roles{Self: "the test"})
}

// newTLSCluster is newCtlCluster on mutual TLS: the controller and brokers
// 1..3 each with its certificate from dir, requiring client certificates,
// hence with authorization on. The test's own admin certificate is a
// superuser (--super-users): it produces and consumes as well as managing
// topics, which the admin role alone may not.
func newTLSCluster(t *testing.T, dir string, session time.Duration, args ...string) *ctlCluster {
	t.Helper()
	c := &ctlCluster{t: t, ctlAddr: freeAddr(t), ctlDir: t.TempDir(), args: args, sessionT: session,
		dirs: map[int32]string{}, extraDirs: map[int32][]string{}, brokers: map[int32]*testutil.Broker{}, clients: map[int32]*client{},
		brokerArgs: func(id int32) []string {
			return append(tlsFlags(dir, fmt.Sprintf("broker-%d", id), "require"), "--super-users", tlsconf.AdminPrincipal)
		},
		dialOpts: testTLS(t, dir)}
	c.ctlArgs = append([]string{"--listen", c.ctlAddr, "--store", c.ctlDir, "--session-timeout", session.String()},
		append(tlsFlags(dir, "controller", "require"), "--super-users", tlsconf.AdminPrincipal)...)
	c.startController()
	conn, err := grpc.NewClient(c.ctlAddr, c.dialOpts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c.ctlConn, c.ctlAPI = conn, replicadv1.NewControllerServiceClient(conn)
	for _, id := range clusterIDs {
		c.dirs[id] = t.TempDir()
		c.startBroker(id)
	}
	c.waitAlive(clusterIDs...)
	return c
}

// A controller and three brokers on mutual TLS (certificates from certs
// init): they register, replicate under acks=all with min ISR 2, and fail
// over when the leader is killed; the killed broker comes back into the
// ISR; every acknowledged record is readable. ctlclient with the admin
// certificate works; without a certificate, with another CA's or with an
// expired one it is refused with a message saying which.
func TestTLSClusterReplicatesAndFailsOver(t *testing.T) {
	dir := devCerts(t)
	const session = 2 * time.Second
	c := newTLSCluster(t, dir, session, "--min-insync-replicas", "2")
	c.createTopic("secure", 1, 3)

	var acks ackLog
	stop := make(chan struct{})
	done := runProducer(c, "secure", &acks, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	waitAcks(t, &acks, 10, 30*time.Second)
	p, err := c.partitionState("secure", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The followers fetch over TLS: all three are in the ISR.
	c.waitInIsr("secure", 0, p.GetReplicas()[0], 30*time.Second)
	testutil.Eventually(t, 30*time.Second, func() error {
		p, err := c.partitionState("secure", 0)
		if err != nil {
			return err
		}
		if len(p.GetIsr()) != 3 {
			return fmt.Errorf("ISR %v", p.GetIsr())
		}
		return nil
	})
	old := p.GetLeader()
	b, _ := c.broker(old)
	b.Kill()
	np := c.waitNewLeader("secure", 0, old, session+5*time.Second)
	if slices.Contains(np.GetIsr(), old) {
		t.Fatalf("ISR %v still holds the killed broker %d", np.GetIsr(), old)
	}
	waitAcks(t, &acks, len(acks.snapshot())+10, 30*time.Second)
	c.startBroker(old)
	c.waitInIsr("secure", 0, old, 60*time.Second)
	close(stop)
	<-done

	want := acks.snapshot()
	p, err = c.partitionState("secure", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, leader := c.broker(p.GetLeader())
	var got []string
	for _, r := range leader.consumeAll("secure", 0) {
		got = append(got, string(r.GetValue()))
	}
	if ok, n := isSubsequence(want, got); !ok {
		t.Fatalf("%d acknowledged records, only the first %d found in order among the %d in the log", len(want), n, len(got))
	}
	t.Logf("%d acknowledged records all readable over TLS after a failover", len(want))

	// ctlclient with the admin certificate, by flags and by environment.
	admin := tlsFlags(dir, "admin", "")
	r := runCtlclient(t, nil, "", append([]string{"--controller", c.ctlAddr, "describe-cluster"}, admin...)...).want(t, 0)
	if !strings.Contains(r.stdout, "secure") {
		t.Fatalf("describe-cluster:\n%s", r.stdout)
	}
	env := []string{"CTLCLIENT_TLS_CERT=" + admin[3], "CTLCLIENT_TLS_KEY=" + admin[5], "CTLCLIENT_TLS_CA=" + admin[1]}
	leaderAddr := func() string { b, _ := c.broker(p.GetLeader()); return b.Addr }()
	runCtlclient(t, env, "", "--broker", leaderAddr, "describe").want(t, 0)
	runCtlclient(t, env, "", "--controller", c.ctlAddr, "produce", "--topic", "secure", "--partition", "0", "--acks", "-1", "--value", "by-ctlclient").want(t, 0)

	// No certificate at all: plaintext against TLS.
	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "describe-cluster").want(t, 1)
	wantStderr(t, r, "the controller at "+c.ctlAddr+" speaks TLS; ctlclient has no --tls-*")
	// The CA but no certificate: mutual TLS refuses.
	r = runCtlclient(t, nil, "", append([]string{"--controller", c.ctlAddr, "describe-cluster"}, tlsFlags(dir, "", "")...)...).want(t, 1)
	wantStderr(t, r, "requires a client certificate (mutual TLS) and ctlclient presented none")
	// Another CA's certificate, trusting the other CA only: both sides refuse.
	other := filepath.Join(t.TempDir(), "other")
	runCtlclient(t, nil, "", "certs", "init", "--dir", other, "--brokers", "0").want(t, 0)
	r = runCtlclient(t, nil, "", append([]string{"--controller", c.ctlAddr, "describe-cluster"}, tlsFlags(other, "admin", "")...)...).want(t, 1)
	wantStderr(t, r, "the certificate of the controller at "+c.ctlAddr+" is signed by an unknown CA")
	// Another CA's certificate, trusting the cluster's CA: the controller refuses it.
	mixed := []string{"--tls-ca", filepath.Join(dir, "ca.crt"), "--tls-cert", filepath.Join(other, "admin.crt"), "--tls-key", filepath.Join(other, "admin.key")}
	r = runCtlclient(t, nil, "", append([]string{"--controller", c.ctlAddr, "describe-cluster"}, mixed...)...).want(t, 1)
	wantStderr(t, r, "refused the certificate of ctlclient: it is not signed by a CA that server trusts")
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(c.ctl.Stderr(), "signed by an unknown CA") {
			return fmt.Errorf("the controller did not log the refused handshake")
		}
		return nil
	})
	// An expired certificate of the right CA.
	ca, err := tlsconf.LoadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
	if err != nil {
		t.Fatal(err)
	}
	leaf := tlsconf.LoopbackLeaf(tlsconf.AdminPrincipal, time.Hour)
	leaf.NotBefore, leaf.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	certPEM, keyPEM, err := ca.Issue(leaf)
	if err != nil {
		t.Fatal(err)
	}
	expDir := t.TempDir()
	writeFile(t, filepath.Join(expDir, "admin.crt"), certPEM)
	writeFile(t, filepath.Join(expDir, "admin.key"), keyPEM)
	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "describe-cluster", "--tls-ca", filepath.Join(dir, "ca.crt"),
		"--tls-cert", filepath.Join(expDir, "admin.crt"), "--tls-key", filepath.Join(expDir, "admin.key")).want(t, 1)
	wantStderr(t, r, "refused the certificate of ctlclient: it has expired or is not valid yet")
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(c.ctl.Stderr(), "the client certificate (spiffe://replicad/admin) has expired") {
			return fmt.Errorf("the controller did not log the expired certificate")
		}
		return nil
	})
}

func wantStderr(t *testing.T, r ctlResult, part string) {
	t.Helper()
	if !strings.Contains(r.stderr, part) {
		t.Fatalf("stderr does not say %q:\n%s", part, r.stderr)
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A broker without --tls-* registering with a TLS controller exits 1
// after a few attempts, saying the controller speaks TLS; a TLS broker
// with a plaintext controller likewise says the controller does not.
func TestTLSPlaintextMismatchFailsClearly(t *testing.T) {
	dir := devCerts(t)
	ctlAddr := freeAddr(t)
	testutil.StartController(t, bins.Ctlclient, append([]string{"--listen", ctlAddr, "--store", t.TempDir()},
		tlsFlags(dir, "controller", "require")...)...)
	code, stderr := testutil.RunBrokerExpectingExit(t, bins.Replicad, testutil.BrokerOptions{ID: 1, LogDirs: []string{t.TempDir()},
		Args: []string{"--controller", ctlAddr}})
	if code != 1 || !strings.Contains(stderr, "the controller at "+ctlAddr+" speaks TLS; this broker has no --tls-*") {
		t.Fatalf("plaintext broker, TLS controller: exit %d, stderr:\n%s", code, stderr)
	}

	plainAddr := freeAddr(t)
	testutil.StartController(t, bins.Ctlclient, "--listen", plainAddr, "--store", t.TempDir())
	code, stderr = testutil.RunBrokerExpectingExit(t, bins.Replicad, testutil.BrokerOptions{ID: 2, LogDirs: []string{t.TempDir()},
		Args: append([]string{"--controller", plainAddr}, tlsFlags(dir, "broker-2", "require")...)})
	if code != 1 || !strings.Contains(stderr, "the controller at "+plainAddr+" does not speak TLS") {
		t.Fatalf("TLS broker, plaintext controller: exit %d, stderr:\n%s", code, stderr)
	}
}

// A standalone broker on TLS serves /metrics over HTTPS with --metrics-tls,
// with the same certificate.
func TestTLSMetricsListener(t *testing.T) {
	dir := devCerts(t)
	args := append([]string{"--metrics-listen", "127.0.0.1:0", "--metrics-tls"}, tlsFlags(dir, "broker-1", "")...)
	b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: 1, LogDirs: []string{t.TempDir()}, Args: args})
	var metricsAddr string
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, l := range strings.Split(b.Stderr(), "\n") {
			if a, ok := strings.CutPrefix(l, "replicad metrics listening on "); ok {
				metricsAddr = strings.TrimSpace(a)
				return nil
			}
		}
		return fmt.Errorf("no metrics address yet")
	})
	pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Get("https://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "# TYPE") {
		t.Fatalf("GET /metrics over HTTPS: %s\n%.300s", resp.Status, body)
	}
	if resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13 {
		t.Fatalf("not TLS 1.3: %+v", resp.TLS)
	}
	// And the gRPC server is TLS: the test's certificate works.
	cl := newClient(t, b.DialWith(t, testTLS(t, dir)...))
	cl.describe()
}
