package integration

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// TestAlterReplicaLogDirUnderLoad ensures a real broker with two log dirs
// moves a partition to the other dir while a producer keeps appending: the
// move finishes (future_log_dir clears), the partition's log_dir is the new
// dir, and every acknowledged record is readable in order.
func TestAlterReplicaLogDirUnderLoad(t *testing.T) {
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "a"), filepath.Join(root, "b")
	_, c := startBroker(t, 1, dirA, dirB)
	c.becomeLeader(1, leaderState("moving", 0, 1, 1))
	p, err := c.partition("moving", 0)
	if err != nil {
		t.Fatal(err)
	}
	src, dest := p.GetLogDir(), dirB
	if src == dirB {
		dest = dirA
	}
	next := 0
	for ; next < 2000; next += 100 {
		vals := make([]string, 100)
		for i := range vals {
			vals[i] = strconv.Itoa(next + i)
		}
		c.produce("moving", 0, -1, vals...)
	}

	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var produceErr error
	wg.Go(func() {
		// Not c.produce: it calls t.Fatal, which belongs to the test's goroutine.
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			resp, err := c.log.Produce(ctx(t), &replicadv1.ProduceRequest{Topic: "moving", Partition: 0, Acks: -1, TimeoutMs: 10000,
				Records: []*replicadv1.Record{{Value: []byte(strconv.Itoa(next))}, {Value: []byte(strconv.Itoa(next + 1))}}})
			switch {
			case err != nil:
				produceErr = err
			case resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || resp.GetBaseOffset() != int64(next):
				produceErr = fmt.Errorf("produce at %d: %v", next, resp)
			default:
				next += 2
			}
			mu.Unlock()
			if produceErr != nil {
				return
			}
		}
	})
	resp, err := c.rm.AlterReplicaLogDirs(ctx(t), &replicadv1.AlterReplicaLogDirsRequest{
		Partitions: []*replicadv1.AlterReplicaLogDir{{Topic: "moving", Partition: 0, LogDir: dest}},
	})
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatalf("AlterReplicaLogDirs: %v", err)
	}
	if code := resp.GetPartitionErrors()[0].GetErrorCode(); code != replicadv1.ErrorCode_ERROR_CODE_NONE {
		close(stop)
		wg.Wait()
		t.Fatalf("AlterReplicaLogDirs: %v", resp)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		p, err := c.partition("moving", 0)
		if err != nil {
			return err
		}
		if p.GetFutureLogDir() != "" || p.GetLogDir() != dest {
			return fmt.Errorf("log_dir %q future_log_dir %q", p.GetLogDir(), p.GetFutureLogDir())
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if produceErr != nil {
		t.Fatalf("producing during the move: %v", produceErr)
	}

	recs := c.consumeAll("moving", 0)
	if len(recs) != next {
		t.Fatalf("read %d records, %d acknowledged", len(recs), next)
	}
	for i, r := range recs {
		if r.GetOffset() != int64(i) || string(r.GetValue()) != strconv.Itoa(i) {
			t.Fatalf("record %d: offset %d value %q", i, r.GetOffset(), r.GetValue())
		}
	}
	p, err = c.partition("moving", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetLogDir() != dest || p.GetHighWatermark() != int64(next) {
		t.Fatalf("after the move: %v", p)
	}

	bad, err := c.rm.AlterReplicaLogDirs(ctx(t), &replicadv1.AlterReplicaLogDirsRequest{
		Partitions: []*replicadv1.AlterReplicaLogDir{{Topic: "moving", Partition: 0, LogDir: filepath.Join(root, "c")}},
	})
	if err != nil || bad.GetPartitionErrors()[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_LOG_DIR_NOT_FOUND {
		t.Fatalf("move to an unknown dir: %v %v", bad, err)
	}
}
