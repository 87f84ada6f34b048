package brokersession

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replicad/replicad/core/tp"
)

// A control request at the epoch of the controller the session follows is
// from that controller; an older epoch is stale; the same epoch under
// another controller id is not the active controller.
func TestCheckControllerKnownEpoch(t *testing.T) {
	f := newFakeController(60000)
	f.ctlID, f.ctlEpoch = 3, 7
	f.serve(t, "127.0.0.1:0")
	s := start(t, testConfig(t, f.addr))
	ctx := context.Background()
	for _, c := range []struct {
		id, epoch int32
		want      ControllerVerdict
	}{
		{3, 7, ControllerActive},
		{3, 6, ControllerStale},
		{9, 7, ControllerNotActive},
	} {
		got, active, err := s.CheckController(ctx, c.id, c.epoch)
		if err != nil || got != c.want || active.ID != 3 || active.Epoch != 7 || active.Addr != f.addr {
			t.Errorf("CheckController(%d, %d) = %v %+v %v, want %v following controller 3 at 7 (%s)", c.id, c.epoch, got, active, err, c.want, f.addr)
		}
	}
	_, heartbeats, _ := f.counts()
	if heartbeats != 0 {
		t.Errorf("%d heartbeats: a known epoch needs no confirmation", heartbeats)
	}
}

// A request at a higher epoch than the session knows is judged after every
// controller was asked: the new controller's epoch is confirmed (and the
// session follows it from then on, telling OnControllerChange), an epoch no
// controller holds (a hand-made request) is not, and with no controller
// answering the check fails.
func TestCheckControllerConfirmsNewerEpoch(t *testing.T) {
	a, b := newFakeController(60000), newFakeController(60000)
	a.ctlID, a.ctlEpoch = 1, 7
	b.ctlID, b.ctlEpoch, b.standby = 2, 8, true
	a.serve(t, "127.0.0.1:0")
	b.serve(t, "127.0.0.1:0")
	var mu sync.Mutex
	var changes []string
	cfg := testConfig(t, a.addr, b.addr)
	cfg.OnControllerChange = func(addr string) { mu.Lock(); changes = append(changes, addr); mu.Unlock() }
	s := start(t, cfg)
	ctx := context.Background()

	// B takes over at epoch 8 (A, deposed, still answers as 7); its first
	// request arrives before any heartbeat told the session.
	b.with(func(f *fakeController) { f.standby = false })
	got, active, err := s.CheckController(ctx, 2, 8)
	if err != nil || got != ControllerActive || active.ID != 2 || active.Epoch != 8 || active.Addr != b.addr {
		t.Fatalf("CheckController(2, 8) = %v %+v %v, want active, following controller 2 at 8 (%s)", got, active, err, b.addr)
	}
	mu.Lock()
	followed := slices.Clone(changes)
	mu.Unlock()
	if len(followed) == 0 || followed[len(followed)-1] != b.addr {
		t.Errorf("OnControllerChange calls %v, want the last to name %s", followed, b.addr)
	}
	// The deposed controller is now stale.
	if got, _, _ := s.CheckController(ctx, 1, 7); got != ControllerStale {
		t.Errorf("CheckController(1, 7) after B took over = %v, want stale", got)
	}

	// An epoch no controller holds.
	got, active, err = s.CheckController(ctx, 0, 100)
	if err != nil || got != ControllerNotActive || active.Epoch != 8 {
		t.Fatalf("CheckController(0, 100) = %v %+v %v, want not active, following epoch 8", got, active, err)
	}

	// Nobody answers.
	a.stop()
	b.stop()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if got, _, err := s.CheckController(cctx, 2, 9); err == nil {
		t.Fatalf("CheckController with no controller up = %v, nil error; want an error", got)
	}
}

// The registration says whether the broker's previous life lost nothing
// (its previous broker epoch, KIP-966) and its min ISR; a registration again
// in the same life (after a fencing) names the epoch before, since the
// process lost nothing. Every heartbeat carries the offline replicas.
func TestRegistrationAndHeartbeatCarryDurabilityState(t *testing.T) {
	f := newFakeController(150) // heartbeats every 50 ms
	f.epoch = 9
	f.serve(t, "127.0.0.1:0")
	cfg := testConfig(t, f.addr)
	cfg.PreviousBrokerEpoch, cfg.MinInsyncReplicas = 8, 2
	cfg.OfflinePartitions = func() []tp.TopicPartition { return []tp.TopicPartition{{Topic: "orders", Partition: 3}} }
	s := start(t, cfg)
	eventually(t, "a heartbeat", func() bool { _, n, _ := f.counts(); return n > 0 })
	f.with(func(f *fakeController) {
		reg := f.registrations[0]
		if reg.GetPreviousBrokerEpoch() != 8 || reg.GetMinInsyncReplicas() != 2 {
			t.Errorf("registration %v, want previous broker epoch 8 and min ISR 2", reg)
		}
		hb := f.heartbeats[0]
		if len(hb.GetOfflinePartitions()) != 1 || hb.GetOfflinePartitions()[0].GetTopic() != "orders" || hb.GetOfflinePartitions()[0].GetPartition() != 3 {
			t.Errorf("heartbeat %v, want offline orders-3", hb)
		}
		f.fenced = true
	})
	eventually(t, "a registration again after the fencing", func() bool { n, _, _ := f.counts(); return n >= 2 })
	f.with(func(f *fakeController) {
		if reg := f.registrations[1]; reg.GetPreviousBrokerEpoch() != 10 {
			t.Errorf("registration again in the same life names previous broker epoch %d, want 10 (the session's)", reg.GetPreviousBrokerEpoch())
		}
	})
	_ = s
}
