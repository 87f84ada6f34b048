package fetcher

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
)

// dialLog records the outcome of every TCP connection attempt of a gRPC
// channel, without changing how the channel schedules them.
type dialLog struct {
	mu       sync.Mutex
	failures []time.Time
}

func (d *dialLog) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		d.mu.Lock()
		d.failures = append(d.failures, time.Now())
		d.mu.Unlock()
	}
	return c, err
}

// failedSince reports whether an attempt failed at or after t.
func (d *dialLog) failedSince(t time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.failures) > 0 && !d.failures[len(d.failures)-1].Before(t)
}

// A leader that refuses connections for a long while (its listener closed,
// its connections reset) and then comes back on the same address has its
// followers' fetch streams back within about a second or two of the heal,
// with the default backoffs: Kafka retries within replica.fetch.backoff.ms
// and reconnect.backoff.max.ms (1 s each). With gRPC's default channel
// backoff (growing 1.6 times up to 120 s) and the fetcher's old 5 s bound,
// the channel's next attempt after 15 s of refusals comes 5 to 13 s later.
func TestReconnectSoonAfterLongRefusal(t *testing.T) {
	if testing.Short() {
		t.Skip("a 15 s outage")
	}
	const (
		outage   = 15 * time.Second
		reopenBy = 2 * time.Second // gRPC's backoff: 1 s + 20% jitter
	)
	e := newEnv(t, "grpc")
	var dl dialLog
	e.grpc = NewGRPCClient(grpc.WithContextDialer(dl.dial))
	e.client = &countingClient{LeaderClient: e.grpc}
	e.cfg.Client = e.client
	e.cfg.ReconnectBackoff, e.cfg.MaxReconnectBackoff = 0, 0 // the defaults under test

	fl := newFakeLeader(t)
	ll := fl.addPartition(p0, 1, 0)
	appendBatches(t, ll, 1, 2)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	srv := serveFetch(lis, fl)
	leader := core.Broker{ID: 1, Host: "127.0.0.1", Port: int32(lis.Addr().(*net.TCPAddr).Port)}
	r := e.follow(p0, 1, 0)
	e.manager()
	e.add(p0, leader, 1)
	waitCaughtUp(t, r, ll)

	// The outage: connections reset, then refused.
	srv.Stop()
	cut := time.Now()
	// Heal just after an attempt failed, late in the outage: the channel's
	// backoff is then at its longest.
	deadline := cut.Add(outage + 15*time.Second)
	for !dl.failedSince(cut.Add(outage)) {
		if time.Now().After(deadline) {
			t.Fatal("no connection attempt refused after the outage's end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	srv = serveFetch(lis, fl)
	e.mu.Lock()
	e.servers = append(e.servers, srv) // stopped after the fetchers
	e.mu.Unlock()
	healed := time.Now()
	fl.append(p0, 3)
	for e.client.opens.Load() < 2 || r.LogEndOffset() != ll.LogEndOffset() {
		if time.Since(healed) > reopenBy {
			t.Fatalf("fetch stream not back %v after the heal (outage %v, streams opened %d)",
				reopenBy, healed.Sub(cut).Round(time.Millisecond), e.client.opens.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("outage %v, stream back and caught up %v after the heal",
		healed.Sub(cut).Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
	sameLog(t, r.log, ll)
}

// serveFetch serves fl's FetchService on lis until the server is stopped.
func serveFetch(lis net.Listener, fl *fakeLeader) *grpc.Server {
	srv := grpc.NewServer(grpcx.ServerOptions()...)
	replicadv1.RegisterFetchServiceServer(srv, &FetchServer{Handler: fl})
	go func() { _ = srv.Serve(lis) }()
	return srv
}
