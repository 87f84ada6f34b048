package it

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// TestRetentionByTimeAndSize runs real brokers with short retention: by
// time, the leader of three deletes the segments whose newest record is
// older than --log-retention-ms, never the active one, and both followers
// follow its log start and delete theirs; by size, a broker keeps at least
// --log-retention-bytes and no whole segment more.
func TestRetentionByTimeAndSize(t *testing.T) {
	value := func(i int) string { return fmt.Sprintf("%03d-%s", i, strings.Repeat("r", 300)) }
	base := []string{"--segment-bytes", "4096", "--max-batch-bytes", "2048", "--log-retention-check-interval", "200ms"}

	t.Run("time", func(t *testing.T) {
		args := append(append([]string(nil), base...), "--log-retention-ms", "1500")
		dirs := make([]string, 4)
		clients := make([]*client, 4)
		var live []*replicadv1.Broker
		for id := int32(1); id <= 3; id++ {
			dirs[id] = t.TempDir()
			b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: []string{dirs[id]}, Args: args})
			clients[id] = newClient(t, b.Dial(t))
			live = append(live, endpoint(t, id, b))
		}
		for id := int32(1); id <= 3; id++ {
			clients[id].sendLeaderAndIsr(1, &replicadv1.PartitionState{Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 1,
				Isr: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}, IsNew: true}, live)
		}
		for i := range 40 {
			clients[1].produce("orders", 0, -1, value(i))
		}
		produced := time.Now()
		active := segmentBases(t, filepath.Join(dirs[1], "orders-0"))
		if len(active) < 3 {
			t.Fatalf("segments %v: want several", active)
		}
		last := active[len(active)-1]
		for id := int32(1); id <= 3; id++ {
			testutil.Eventually(t, 15*time.Second, func() error {
				p, err := clients[id].partition("orders", 0)
				if err != nil {
					return err
				}
				if p.GetLogStartOffset() != last || p.GetLogEndOffset() != 40 {
					return fmt.Errorf("broker %d log start %d, LEO %d; want %d (the active segment's base), 40", id,
						p.GetLogStartOffset(), p.GetLogEndOffset(), last)
				}
				// The log start moves first, then (once checkpointed) the
				// segments below it go.
				if segs := segmentBases(t, filepath.Join(dirs[id], "orders-0")); len(segs) != 1 || segs[0] > last {
					return fmt.Errorf("broker %d keeps segments %v, want only the one holding %d", id, segs, last)
				}
				return nil
			})
		}
		if waited := time.Since(produced); waited < 1500*time.Millisecond {
			t.Fatalf("segments deleted %v after their newest record, before the 1.5 s retention", waited)
		}
		recs := clients[1].consumeFrom("orders", 0, last)
		if int64(len(recs)) != 40-last || string(recs[len(recs)-1].GetValue()) != value(39) {
			t.Fatalf("%d records kept from %d, want the active segment's %d", len(recs), last, 40-last)
		}
	})

	t.Run("size", func(t *testing.T) {
		args := append(append([]string(nil), base...), "--log-retention-bytes", "8192")
		dir := t.TempDir()
		b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: 1, LogDirs: []string{dir}, Args: args})
		c := newClient(t, b.Dial(t))
		c.sendLeaderAndIsr(1, &replicadv1.PartitionState{Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 1,
			Isr: []int32{1}, Replicas: []int32{1}, IsNew: true}, []*replicadv1.Broker{endpoint(t, 1, b)})
		for i := range 80 {
			c.produce("orders", 0, -1, value(i))
		}
		pdir := filepath.Join(dir, "orders-0")
		// The check runs every 200 ms, during the produces too: wait for
		// one after the last.
		testutil.Eventually(t, 15*time.Second, func() error {
			p, err := c.partition("orders", 0)
			if err != nil {
				return err
			}
			if p.GetLogStartOffset() == 0 {
				return fmt.Errorf("log start still 0")
			}
			if segs := segmentBases(t, pdir); segs[0] != p.GetLogStartOffset() {
				return fmt.Errorf("segments %v, log start %d", segs, p.GetLogStartOffset())
			}
			if size := dirSize(t, pdir); size < 8192 || size > 8192+2*4096 {
				return fmt.Errorf("the log holds %d bytes of segments, want at least the 8192 retained and no more than a segment over", size)
			}
			return nil
		})
	})
}

// dirSize is the bytes of the .log files in dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, name := range segmentFiles(t, dir) {
		n += fileSize(t, name)
	}
	return n
}
