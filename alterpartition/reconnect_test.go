package alterpartition

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// refusals records when the channel's connection attempts were refused,
// without changing how the channel schedules them.
type refusals struct {
	mu   sync.Mutex
	last time.Time
}

func (r *refusals) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		r.mu.Lock()
		r.last = time.Now()
		r.mu.Unlock()
	}
	return c, err
}

func (r *refusals) since(t time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.last.Before(t)
}

// A change submitted while the controller refuses connections for a long
// while is committed within about two seconds of the controller being back,
// with the default backoffs: the channel reconnects at most a second apart
// (grpcx.ConnectParams) and the Manager retries at most a second apart
// (Kafka's retry.backoff.max.ms). A leader cut from its controller then
// gets its followers back into the ISR soon after the heal. With gRPC's
// default channel backoff (growing 1.6 times up to 120 s) the next attempt
// after 15 s of refusals came 5 to 13 s later.
func TestControllerBackAfterLongRefusal(t *testing.T) {
	if testing.Short() {
		t.Skip("a 15 s outage")
	}
	const (
		outage      = 15 * time.Second
		committedBy = 3 * time.Second // the channel's backoff (1 s + 20%), then the Manager's (1 s)
	)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // refused from the start
	var r refusals
	m, err := New(Config{Controller: addr, BrokerID: 1, BrokerEpoch: func() int64 { return 3 }, Logger: zerolog.Nop(),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(r.dial)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	cut := time.Now()
	results, _ := submit(m, expansion("orders", 0, 1, 2))
	// Heal just after an attempt was refused, late in the outage: the
	// channel's backoff is then at its longest.
	deadline := cut.Add(outage + 15*time.Second)
	for !r.since(cut.Add(outage)) {
		if time.Now().After(deadline) {
			t.Fatal("no connection attempt refused after the outage's end")
		}
		time.Sleep(5 * time.Millisecond)
	}
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	srv := grpc.NewServer()
	ctl := &fakeController{received: make(chan *replicadv1.AlterPartitionRequest, 64),
		script: func(_ context.Context, _ int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
			return accept(req), nil
		}}
	replicadv1.RegisterControllerServiceServer(srv, ctl)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	healed := time.Now()
	select {
	case res := <-results:
		if res.Error != core.ErrNone {
			t.Fatalf("result %+v, want NONE", res)
		}
		t.Logf("outage %v, committed %v after the heal", healed.Sub(cut).Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
	case <-time.After(committedBy):
		t.Fatalf("not committed %v after the heal (outage %v)", committedBy, healed.Sub(cut).Round(time.Millisecond))
	}
}
