package integration

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
		// sent[i]: just before record i was produced; the broker stamps it
		// at or after that (to the ms below).
		var sent [40]time.Time
		for i := range 40 {
			sent[i] = time.Now()
			clients[1].produce("orders", 0, -1, value(i))
		}
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
		// The deleted segments' newest record is the one before the
		// active segment's base (timestamps are whole ms: 1 ms of slack).
		if waited := time.Since(sent[last-1]); waited < 1499*time.Millisecond {
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

// TestFollowersApplyRetentionOnIdlePartition: after the last produce to a
// partition (retention.bytes 256 KiB), each follower is down to the retained
// bytes of its own segments within a few retention checks, though the
// partition gets no more records and whatever the leader deletes. A
// replica's segments are its own: they begin where its appends fell, by its
// segment.bytes and segment.ms and its restarts, so following the leader's
// log start is not enough. Here the leader's segments are 1 MiB and the
// followers' 64 KiB: the leader, with 1 MiB in one segment and the next
// under retention, deletes nothing. Before, followers applied only the
// leader's log start, so they kept all of it (log start 0) for good.
func TestFollowersApplyRetentionOnIdlePartition(t *testing.T) {
	const (
		segment   = 64 << 10
		retention = 256 << 10
	)
	dirs := make([]string, 4)
	clients := make([]*client, 4)
	var live []*replicadv1.Broker
	for id := int32(1); id <= 3; id++ {
		seg := segment
		if id == 1 {
			seg = 1 << 20
		}
		args := []string{"--segment-bytes", fmt.Sprint(seg), "--max-batch-bytes", fmt.Sprint(segment),
			"--log-retention-bytes", fmt.Sprint(retention), "--log-retention-check-interval", "200ms"}
		dirs[id] = t.TempDir()
		b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: []string{dirs[id]}, Args: args})
		clients[id] = newClient(t, b.Dial(t))
		live = append(live, endpoint(t, id, b))
	}
	for id := int32(1); id <= 3; id++ {
		clients[id].sendLeaderAndIsr(1, &replicadv1.PartitionState{Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 1,
			Isr: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}, IsNew: true}, live)
	}
	// 1 MiB in batches of 30 KiB, acks=all: every replica holds all of it.
	value := strings.Repeat("v", 1000)
	batch := make([]string, 30)
	for i := range batch {
		batch[i] = value
	}
	for range 35 {
		clients[1].produce("orders", 0, -1, batch...)
	}
	last := time.Now()
	for id := int32(2); id <= 3; id++ {
		pdir := filepath.Join(dirs[id], "orders-0")
		testutil.Eventually(t, 5*time.Second, func() error {
			p, err := clients[id].partition("orders", 0)
			if err != nil {
				return err
			}
			segs := segmentBases(t, pdir)
			if p.GetLogStartOffset() == 0 || segs[0] != p.GetLogStartOffset() {
				return fmt.Errorf("follower %d: log start %d, segments %v", id, p.GetLogStartOffset(), segs)
			}
			if size := dirSize(t, pdir); size > retention+segment {
				return fmt.Errorf("follower %d holds %d bytes of segments %v (log start %d), want at most %d retained and a segment over",
					id, size, segs, p.GetLogStartOffset(), retention)
			}
			return nil
		})
		t.Logf("follower %d down to the retained bytes %v after the last produce", id, time.Since(last).Round(time.Millisecond))
	}
	// The leader keeps its own: its 1 MiB segment is not past retention.
	if p, err := clients[1].partition("orders", 0); err != nil || p.GetLogStartOffset() != 0 {
		t.Fatalf("leader: %v, log start %d; want 0 (its first segment holds more than what retention keeps after it)", err, p.GetLogStartOffset())
	}
	// Every replica still serves what it kept: the followers' records match
	// the leader's from the highest follower log start.
	from := int64(0)
	for id := int32(2); id <= 3; id++ {
		p, _ := clients[id].partition("orders", 0)
		from = max(from, p.GetLogStartOffset())
	}
	if recs := clients[1].consumeFrom("orders", 0, from); int64(len(recs)) != 35*30-from {
		t.Fatalf("leader serves %d records from %d, want %d", len(recs), from, 35*30-from)
	}
}
