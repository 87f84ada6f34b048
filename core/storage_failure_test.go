package core

import (
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// Every I/O failure of a follower's log, in an append, its fsync or a
// truncation, reaches the one path that takes the log dir offline, as the
// leader's do (issue 10, path 3). Before, the fetcher only set the partition
// aside and the broker went on hosting, and being elected for, a log on a
// failing disk.
func TestFollowerStorageFailureTakesItsDirOffline(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind crashfs.OpKind
		run  func(l *log.Log) error
	}{
		{"append", crashfs.OpWrite, func(l *log.Log) error { return followerAppend(l, "lost") }},
		{"fsync", crashfs.OpSync, func(l *log.Log) error { return followerAppend(l, "lost") }},
		{"truncate", crashfs.OpTruncate, func(l *log.Log) error { return l.TruncateTo(1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := crashfs.New()
			h := newHarness(t, 2, func(c *Config) {
				c.FS = fsys
				c.LogConfig = log.DefaultConfig()
				c.LogConfig.FlushPolicy = log.FlushEveryBatch
			})
			h.leaderAndIsr(1, state("orders", 0, 2, 1, []int32{1, 2}, []int32{1, 2}))
			l, ok := h.rm.logs.GetLog(tp0)
			if !ok {
				t.Fatal("no follower log")
			}
			for _, v := range []string{"a", "b"} {
				if err := followerAppend(l, v); err != nil {
					t.Fatal(err)
				}
			}
			dir, _ := h.rm.logs.DirOf(tp0)
			var once sync.Once
			fsys.SetFault(func(op crashfs.Op) error {
				var err error
				if op.Kind == tc.kind && strings.Contains(op.Path, tp0.String()) {
					once.Do(func() { err = syscall.EIO })
				}
				return err
			})
			if err := tc.run(l); !errors.Is(err, log.ErrStorage) {
				t.Fatalf("%s with a failing disk: %v, want log.ErrStorage", tc.name, err)
			}
			// The dir goes offline first, then its partitions.
			waitFor(t, func() bool {
				_, code := h.rm.onlinePartition(tp0)
				return code == ErrStorageError
			})
			for _, d := range h.rm.Describe("", nil).LogDirs {
				if d.Path == dir && d.Online {
					t.Fatalf("log dir %s online after its log failed", dir)
				}
			}
			if off := h.rm.OfflinePartitions(); len(off) != 1 || off[0] != tp0 {
				t.Fatalf("offline partitions %v, want [%v] for the heartbeat", off, tp0)
			}
		})
	}
}

// followerAppend appends one batch at the log end, as the fetcher does.
func followerAppend(l *log.Log, v string) error {
	b := record.Build([]record.Record{{Value: []byte(v)}}, 1)
	b.SetBaseOffset(l.LogEndOffset())
	b.SetLeaderEpoch(1)
	_, err := l.AppendAsFollower(b)
	return err
}
