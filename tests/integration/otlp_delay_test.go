package integration

import (
	"testing"
	"time"
)

// An OTLP endpoint that nobody listens on does not hold a ctlclient
// command up: the span flush at exit is skipped when the endpoint did not
// answer (it used to wait out its 2 s deadline on every command).
func TestUnreachableCollectorDoesNotDelayCtlclient(t *testing.T) {
	b, _ := startBroker(t, 1, t.TempDir())
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + freeAddr(t)}
	runCtlclientEnv(t, env, "--broker", b.Addr, "describe").want(t, 0) // warm the page cache of the binary
	start := time.Now()
	runCtlclientEnv(t, env, "--broker", b.Addr, "describe").want(t, 0)
	if took := time.Since(start); took > 1500*time.Millisecond {
		t.Fatalf("describe took %v with an unreachable collector, want well under the 2 s flush deadline", took)
	}
}
