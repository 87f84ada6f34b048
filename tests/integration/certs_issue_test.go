package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
	"github.com/replicad/replicad/internal/tlsconf"
)

// A certificate from `ctlclient certs issue` is a second identity a real
// mutual-TLS cluster with authorization accepts: refused before an ACL
// names it (through --controller, told to use --bootstrap), producing and
// consuming through --bootstrap once one does, while ca.crt and ca.key
// stay byte for byte what certs init wrote.
func TestCertsIssueSecondIdentity(t *testing.T) {
	dir := devCerts(t)
	caBefore := map[string][]byte{}
	for _, n := range []string{"ca.crt", "ca.key"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		caBefore[n] = b
	}
	r := runCtlclient(t, nil, "", "certs", "issue", "--dir", dir, "--name", "analytics").want(t, 0)
	if !strings.Contains(r.stdout, filepath.Join(dir, "analytics.crt")) || !strings.Contains(r.stderr, "spiffe://replicad/client/analytics") {
		t.Fatalf("certs issue printed:\n%s%s", r.stdout, r.stderr)
	}
	// Again without --force: refused, usage error.
	runCtlclient(t, nil, "", "certs", "issue", "--dir", dir, "--name", "analytics").want(t, 2)

	c := newTLSCluster(t, dir, 2*time.Second)
	const topic = "issued"
	c.createTopic(topic, 1, 3)
	var boot []string
	for _, id := range clusterIDs {
		b, _ := c.broker(id)
		boot = append(boot, b.Addr)
	}
	asAnalytics := func(args ...string) ctlResult {
		return runCtlclient(t, nil, "", append(append([]string{"--bootstrap", strings.Join(boot, ",")}, args...),
			tlsFlags(dir, "analytics", "")...)...)
	}
	principal := tlsconf.ClientPrincipal("analytics")
	r = asAnalytics("produce", topic, "--partition", "0", "--value", "before")
	if r.code != 1 || !strings.Contains(r.stderr, "PermissionDenied") || !strings.Contains(r.stderr, principal) {
		t.Fatalf("produce before any ACL: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Through --controller, a client certificate is told to use --bootstrap:
	// the controller describes the cluster to admins only.
	r = runCtlclient(t, nil, "", append([]string{"--controller", c.ctlAddr, "produce", topic, "--partition", "0", "--value", "x"},
		tlsFlags(dir, "analytics", "")...)...)
	if r.code != 1 || !strings.Contains(r.stderr, "give --bootstrap BROKER[,BROKER...] instead of --controller") || r.stdout != "" {
		t.Fatalf("produce through --controller as a client: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustACLCtl(t, c, dir, "acl", "add", "--principal", principal, "--operation", "write", "--topic", topic)
	mustACLCtl(t, c, dir, "acl", "add", "--principal", principal, "--operation", "read", "--topic", topic)
	testutil.Eventually(t, 30*time.Second, func() error {
		if r := asAnalytics("produce", topic, "--partition", "0", "--value", "by analytics"); r.code != 0 {
			return fmt.Errorf("produce: exit %d: %s", r.code, r.stderr)
		}
		return nil
	})
	testutil.Eventually(t, 30*time.Second, func() error {
		r := asAnalytics("consume", topic, "--partition", "0", "--offset", "earliest")
		if r.code != 0 || !strings.Contains(r.stdout, "by analytics") {
			return fmt.Errorf("consume: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
		}
		return nil
	})
	for n, want := range caBefore {
		got, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s changed", n)
		}
	}
}
