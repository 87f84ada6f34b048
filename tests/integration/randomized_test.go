package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// seedEnv and stepsEnv override the randomized test's seed and step count.
const (
	seedEnv  = "REPLICAD_IT_SEED"
	stepsEnv = "REPLICAD_IT_STEPS"
)

// TestRandomizedReplication ensures, over a seeded random sequence of acks=-1
// produces, leader changes within the ISR and kill -9 restarts across three
// brokers, that no acknowledged record is lost or moved, that every follower
// converges to the leader's LEO and HW, that the leader's HW never moves
// backwards within a leader epoch, and at the end that every replica holds
// the same records below the HW. A failure replays with REPLICAD_IT_SEED.
func TestRandomizedReplication(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv(seedEnv); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, s, err)
		}
	}
	steps := 30
	if s := os.Getenv(stepsEnv); s != "" {
		var err error
		if steps, err = strconv.Atoi(s); err != nil {
			t.Fatalf("%s=%q: %v", stepsEnv, s, err)
		}
	}
	t.Logf("seed %d, %d steps (replay with %s=%d)", seed, steps, seedEnv, seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with seed %d: replay with %s=%d go test -race -run TestRandomizedReplication ./tests/integration/", seed, seedEnv, seed)
		}
	})

	r := &randomRun{
		t:         t,
		rng:       rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>32|1)),
		seed:      seed,
		c:         newCluster(t, "random", "--replica-lag-time-max", "2s"),
		leader:    1,
		epoch:     1,
		acked:     map[int64]string{},
		hwByEpoch: map[int32]int64{},
	}
	r.c.leaderAndIsr(clusterIDs, 1, 1, clusterIDs...)
	for r.step = 1; r.step <= steps; r.step++ {
		switch n := r.rng.IntN(10); {
		case n < 6:
			r.produce()
		case n < 8:
			r.changeLeader()
		default:
			r.restart()
		}
		r.check()
	}
	r.compareReplicas()
	t.Logf("seed %d: %d records acknowledged, %d produces not acknowledged, final leader %d at epoch %d",
		seed, len(r.acked), r.unacked, r.leader, r.epoch)
}

// randomRun is the randomized test's model of the cluster.
type randomRun struct {
	t    *testing.T
	rng  *rand.Rand
	seed int64
	step int
	c    *cluster

	leader  int32
	epoch   int32
	acked   map[int64]string // offset -> value of every acknowledged acks=-1 record
	unacked int              // produces answered with an error: their records may or may not be there
	// hwByEpoch is the highest HW seen on the leader of each leader epoch.
	hwByEpoch map[int32]int64
}

func (r *randomRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("seed %d step %d (leader %d epoch %d): %s", r.seed, r.step, r.leader, r.epoch, fmt.Sprintf(format, args...))
}

func (r *randomRun) logf(format string, args ...any) {
	r.t.Helper()
	r.t.Logf("step %d: %s", r.step, fmt.Sprintf(format, args...))
}

// produce sends 1..3 records with acks=-1 to the leader.
func (r *randomRun) produce() {
	r.t.Helper()
	values := make([]string, 1+r.rng.IntN(3))
	for i := range values {
		values[i] = fmt.Sprintf("s%d-e%d-%d", r.step, r.epoch, i)
	}
	resp, err := r.c.produce(r.leader, -1, 10*time.Second, values...)
	if err != nil {
		r.fatalf("produce to %d: %v", r.leader, err)
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		r.unacked++
		r.logf("produce of %d records to %d not acknowledged: %v", len(values), r.leader, resp)
		return
	}
	for i, v := range values {
		off := resp.GetBaseOffset() + int64(i)
		if prev, ok := r.acked[off]; ok {
			r.fatalf("offset %d acknowledged twice: %q and %q", off, prev, v)
		}
		r.acked[off] = v
	}
	r.logf("produced %d records at %d", len(values), resp.GetBaseOffset())
	r.observeLeader()
}

// isr is the ISR as the current leader sees it.
func (r *randomRun) isr() []int32 {
	r.t.Helper()
	return r.observeLeader().GetIsr()
}

// changeLeader moves leadership to another ISR member (or re-elects the
// leader when it is alone in the ISR) at the next leader epoch.
func (r *randomRun) changeLeader() {
	r.t.Helper()
	isr := r.isr()
	candidates := slices.DeleteFunc(slices.Clone(isr), func(id int32) bool { return id == r.leader })
	next := r.leader
	if len(candidates) > 0 {
		next = candidates[r.rng.IntN(len(candidates))]
	}
	r.elect(next, isr)
}

func (r *randomRun) elect(next int32, isr []int32) {
	r.t.Helper()
	r.logf("leader %d -> %d at epoch %d, ISR %v", r.leader, next, r.epoch+1, isr)
	r.epoch++
	r.leader = next
	r.c.leaderAndIsr(clusterIDs, r.leader, r.epoch, isr...)
}

// restart kills one broker with SIGKILL and restarts it on the same dir as a
// follower. A leader hands its leadership to another ISR member first; when
// it is alone in the ISR a follower is restarted instead.
func (r *randomRun) restart() {
	r.t.Helper()
	victim := clusterIDs[r.rng.IntN(len(clusterIDs))]
	if victim == r.leader {
		isr := r.isr()
		candidates := slices.DeleteFunc(slices.Clone(isr), func(id int32) bool { return id == r.leader })
		if len(candidates) == 0 {
			followers := slices.DeleteFunc(slices.Clone(clusterIDs), func(id int32) bool { return id == r.leader })
			victim = followers[r.rng.IntN(len(followers))]
		} else {
			r.elect(candidates[r.rng.IntN(len(candidates))], isr)
		}
	}
	r.logf("restarting broker %d", victim)
	r.c.kill(victim)
	r.c.start(victim)
	r.c.leaderAndIsr([]int32{victim}, r.leader, r.epoch, r.isr()...)
}

// observeLeader describes the partition on the leader and checks that its HW
// has not moved backwards within the leader epoch.
func (r *randomRun) observeLeader() *replicadv1.PartitionDescription {
	r.t.Helper()
	p, err := r.c.clients[r.leader].partition(r.c.topic, r.c.partition)
	if err != nil {
		r.fatalf("describe leader %d: %v", r.leader, err)
	}
	if p.GetLeaderEpoch() != r.epoch || p.GetLeader() != r.leader {
		r.fatalf("leader %d reports leader %d epoch %d", r.leader, p.GetLeader(), p.GetLeaderEpoch())
	}
	hw := p.GetHighWatermark()
	if prev, ok := r.hwByEpoch[r.epoch]; ok && hw < prev {
		r.fatalf("leader HW moved back from %d to %d within epoch %d", prev, hw, r.epoch)
	}
	r.hwByEpoch[r.epoch] = max(r.hwByEpoch[r.epoch], hw)
	return p
}

// check waits for every follower to reach the leader's LEO and HW and then
// requires every acknowledged record at its offset on the leader.
func (r *randomRun) check() {
	r.t.Helper()
	testutil.Eventually(r.t, 20*time.Second, func() error {
		if err := r.converged(); err != nil {
			return fmt.Errorf("seed %d step %d: replicas not converged: %w", r.seed, r.step, err)
		}
		return nil
	})
	got := r.c.records(r.leader)
	for off, v := range r.acked {
		if off >= int64(len(got)) {
			r.fatalf("acknowledged record %q at %d is beyond the leader's HW %d", v, off, len(got))
		}
		if got[off] != v {
			r.fatalf("offset %d holds %q, acknowledged %q", off, got[off], v)
		}
	}
}

// converged reports why the followers do not yet match the leader.
func (r *randomRun) converged() error {
	l := r.observeLeader()
	if l.GetHighWatermark() != l.GetLogEndOffset() {
		return fmt.Errorf("leader %d LEO %d HW %d ISR %v", r.leader, l.GetLogEndOffset(), l.GetHighWatermark(), l.GetIsr())
	}
	for _, id := range clusterIDs {
		if id == r.leader {
			continue
		}
		f, err := r.c.clients[id].partition(r.c.topic, r.c.partition)
		if err != nil {
			return err
		}
		if f.GetLogEndOffset() != l.GetLogEndOffset() || f.GetHighWatermark() != l.GetHighWatermark() {
			return fmt.Errorf("leader %d LEO %d HW %d, follower %d LEO %d HW %d", r.leader, l.GetLogEndOffset(), l.GetHighWatermark(),
				id, f.GetLogEndOffset(), f.GetHighWatermark())
		}
	}
	return nil
}

// compareReplicas makes every broker leader in turn (all are in sync after
// check) and requires the same records from each.
func (r *randomRun) compareReplicas() {
	r.t.Helper()
	want := r.c.records(r.leader)
	for _, id := range clusterIDs {
		if id == r.leader {
			continue
		}
		isr := r.isr()
		if !slices.Contains(isr, id) {
			testutil.Eventually(r.t, 20*time.Second, func() error {
				if isr = r.isr(); !slices.Contains(isr, id) {
					return fmt.Errorf("seed %d: broker %d not in ISR %v", r.seed, id, isr)
				}
				return nil
			})
		}
		r.elect(id, isr)
		r.check()
		if got := r.c.records(id); !slices.Equal(got, want) {
			r.fatalf("broker %d holds %v, previous leader held %v", id, got, want)
		}
	}
}
