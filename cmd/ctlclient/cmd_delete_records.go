package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func deleteRecordsCommand() *command {
	return &command{
		name:    "delete-records",
		summary: "delete a partition's records below an offset (raise its log start)",
		usage:   "--topic T --partition P --offset N|--offset -1 [--wait D]",
		details: `Asks the partition's leader to raise its log start offset to --offset (Kafka's
DeleteRecords / kafka-delete-records): the records below it are gone from
the leader at once, a consume below it is answered OFFSET_OUT_OF_RANGE, and
the answer comes once every in-sync replica has deleted them too (followers
raise their log start to the leader's at their next fetch), at most --wait.
--offset -1 deletes everything below the high watermark; an offset above it
is refused (OFFSET_OUT_OF_RANGE): only committed records are ever deleted.
Prints the low watermark, the smallest log start of the leader and its ISR
(-o json: the DeleteRecordsResponse). Exits 1 on an error code, among them
REQUEST_TIMED_OUT when the ISR did not follow within --wait (the leader's
deletion stands, and the followers still follow it). With authorization on,
it needs the delete ACL on the topic (or the admin role).

With --controller the leader is found from the controller, as for produce.`,
		example: "ctlclient delete-records --topic orders --partition 0 --offset 1000\nctlclient --controller 127.0.0.1:9090 delete-records --topic orders --partition 2 --offset -1",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition")
			offset := fs.Int64("offset", 0, "the new log start: records below it are deleted; -1: the high watermark")
			wait := fs.Duration("wait", 30*time.Second, "how long the leader waits for the ISR to delete too (at most 5m)")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic", "partition", "offset"); err != nil {
					return err
				}
				if *offset < -1 {
					return usagef("--offset must be an offset, or -1 for the high watermark (got %d)", *offset)
				}
				if *wait <= 0 || *wait > 5*time.Minute {
					return usagef("--wait must be in (0, 5m] (got %v)", *wait)
				}
				cl, err := e.newClient()
				if err != nil {
					return err
				}
				defer cl.Close()
				req := &replicadv1.DeleteRecordsRequest{TimeoutMs: int32(wait.Milliseconds()),
					Partitions: []*replicadv1.DeleteRecordsPartition{{Topic: *topic, Partition: *partition, Offset: *offset}}}
				var res *replicadv1.DeleteRecordsPartitionResult
				var resp *replicadv1.DeleteRecordsResponse
				err = cl.Call(ctx, *topic, *partition, func(ctx context.Context, lc replicadv1.LogServiceClient) (replicadv1.ErrorCode, error) {
					rctx, cancel := e.rpcContextWithWait(ctx, *wait)
					defer cancel()
					r, err := lc.DeleteRecords(rctx, req)
					if err != nil {
						return 0, err
					}
					if len(r.GetPartitions()) != 1 {
						return 0, fmt.Errorf("the broker answered %d partitions for 1", len(r.GetPartitions()))
					}
					resp, res = r, r.GetPartitions()[0]
					return res.GetErrorCode(), nil
				})
				if err != nil {
					return err
				}
				if e.jsonOutput() {
					if err := e.printJSON(resp); err != nil {
						return err
					}
				}
				if res.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
					return answerError{fmt.Sprintf("delete-records %s-%d below %d: %s (low watermark %d)", *topic, *partition, *offset,
						codeName(res.GetErrorCode()), res.GetLowWatermark())}
				}
				if !e.jsonOutput() {
					_, err = fmt.Fprintf(e.stdout, "%s-%d: low watermark %d\n", *topic, *partition, res.GetLowWatermark())
				}
				return err
			}
		},
	}
}
