package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func alterLogDirCommand() *command {
	return &command{
		name:    "alter-log-dir",
		summary: "move a replica to another log dir of the broker",
		usage:   "--topic T --partition P --dir DIR [--wait] [--wait-timeout D]",
		details: `The broker creates a future copy of the partition in DIR (one of its
--log-dirs, an absolute path), fills it from the current log while it keeps
serving, and swaps it in once it has caught up; describe shows the target as
"DIR -> FUTURE" meanwhile. A partition already in DIR answers NONE. Exits 1
unless the answer is NONE (LOG_DIR_NOT_FOUND: DIR is not one of the broker's
log dirs; UNKNOWN_TOPIC_OR_PARTITION: the broker does not host it). With
--wait it then polls describe until the move is done, printing progress, and
exits 1 if --wait-timeout passes first.`,
		example: "ctlclient alter-log-dir --topic orders --partition 0 --dir /data/disk2 --wait",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition")
			dir := fs.String("dir", "", "destination log dir (absolute, one of the broker's --log-dirs)")
			wait := fs.Bool("wait", false, "wait until the move is done")
			waitTimeout := fs.Duration("wait-timeout", 10*time.Minute, "with --wait: give up after this long")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic", "partition", "dir"); err != nil {
					return err
				}
				if !filepath.IsAbs(*dir) {
					return usagef("--dir must be an absolute path")
				}
				var resp *replicadv1.AlterReplicaLogDirsResponse
				err := e.callReplicaManager(ctx, func(rctx context.Context, c replicadv1.ReplicaManagerServiceClient) (err error) {
					resp, err = c.AlterReplicaLogDirs(rctx, &replicadv1.AlterReplicaLogDirsRequest{
						Partitions: []*replicadv1.AlterReplicaLogDir{{Topic: *topic, Partition: *partition, LogDir: *dir}},
					})
					return err
				})
				if err != nil {
					return err
				}
				if err := e.printPartitionErrorsResponse(resp, replicadv1.ErrorCode_ERROR_CODE_NONE, resp.GetPartitionErrors()); err != nil {
					return err
				}
				if err := checkPartitionErrors("alter-log-dir", replicadv1.ErrorCode_ERROR_CODE_NONE, "", resp.GetPartitionErrors()); err != nil || !*wait {
					return err
				}
				return waitForMove(ctx, e, *topic, *partition, *dir, *waitTimeout)
			}
		},
	}
}

// waitForMove polls describe until the partition has no future log dir.
func waitForMove(ctx context.Context, e *env, topic string, partition int32, dir string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		var resp *replicadv1.DescribePartitionsResponse
		err := e.callReplicaManager(ctx, func(rctx context.Context, c replicadv1.ReplicaManagerServiceClient) (err error) {
			resp, err = c.DescribePartitions(rctx, &replicadv1.DescribePartitionsRequest{Topic: topic, Partition: &partition})
			return err
		})
		if err != nil {
			return err
		}
		if len(resp.GetPartitions()) != 1 {
			return answerError{fmt.Sprintf("alter-log-dir: %s-%d is no longer hosted", topic, partition)}
		}
		p := resp.GetPartitions()[0]
		if p.GetFutureLogDir() == "" {
			if filepath.Clean(p.GetLogDir()) != filepath.Clean(dir) {
				return answerError{fmt.Sprintf("alter-log-dir: move ended with the log in %s, not %s", p.GetLogDir(), dir)}
			}
			if !e.jsonOutput() {
				fmt.Fprintf(e.stdout, "moved %s-%d to %s (log end offset %d)\n", topic, partition, p.GetLogDir(), p.GetLogEndOffset())
			}
			return nil
		}
		line := fmt.Sprintf("moving %s-%d: %s -> %s, log end offset %d", topic, partition, p.GetLogDir(), p.GetFutureLogDir(), p.GetLogEndOffset())
		if line != last && !e.jsonOutput() {
			fmt.Fprintln(e.stdout, line)
			last = line
		}
		select {
		case <-ctx.Done():
			return answerError{fmt.Sprintf("alter-log-dir: %s-%d still moving after %s", topic, partition, timeout)}
		case <-tick.C:
		}
	}
}
