package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func consumeCommand() *command {
	return &command{
		name:    "consume",
		summary: "read committed records (below the HW) from a partition",
		usage:   "--topic T --partition P [--offset N] [--max-records N] [--follow] [--max-wait-ms N] [--max-bytes N]",
		details: `Prints "offset<TAB>value" a line (-o json: each ConsumeResponse that carried
records). Stops at the high watermark, or after --max-records; with --follow
it keeps long-polling for new records until interrupted (Ctrl-C, exit 0).
Exits 1 on an error code (OFFSET_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER, ...).

With --bootstrap the partition's leader is found in a broker's Metadata
(the controller may be down), with --controller from the controller,
rather than --broker; a poll answered NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH or UNKNOWN_TOPIC_OR_PARTITION, or
whose leader cannot be reached, is repeated at the same offset on the leader
a fresh lookup names (backoff 100ms doubling to 1s, for up to --timeout
and 20 attempts):
a --follow survives leader changes.`,
		example: "ctlclient consume --topic orders --partition 0\nctlclient consume --topic orders --partition 0 --offset 100 --follow\nctlclient --controller 127.0.0.1:9090 consume --topic orders --partition 2 --follow\nctlclient --bootstrap 127.0.0.1:9091,127.0.0.1:9092 consume --topic orders --partition 2",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition")
			offset := fs.Int64("offset", 0, "first offset to read")
			maxRecords := fs.Int64("max-records", 0, "stop after this many records; 0: no limit")
			follow := fs.Bool("follow", false, "keep waiting for new records at the high watermark")
			maxWaitMs := int32Var(fs, "max-wait-ms", 1000, "with --follow, how long the broker holds a poll that has nothing")
			maxBytes := int32Var(fs, "max-bytes", 1<<20, "most bytes per poll")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic", "partition"); err != nil {
					return err
				}
				if *offset < 0 || *maxRecords < 0 || *maxWaitMs < 0 || *maxBytes < 0 {
					return usagef("--offset, --max-records, --max-wait-ms and --max-bytes must not be negative")
				}
				router, err := e.newLeaderRouter()
				if err != nil {
					return err
				}
				defer router.close()
				c := &consumer{e: e, router: router, topic: *topic, partition: *partition,
					follow: *follow, maxRecords: *maxRecords, maxBytes: *maxBytes}
				if *follow {
					c.maxWaitMs = *maxWaitMs
				}
				err = c.run(ctx, *offset)
				if *follow && ctx.Err() != nil && (errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled) {
					return nil // interrupting a follow is its normal end
				}
				return err
			}
		},
	}
}

type consumer struct {
	e          *env
	router     *leaderRouter
	topic      string
	partition  int32
	follow     bool
	maxRecords int64
	maxWaitMs  int32
	maxBytes   int32
}

func (c *consumer) run(ctx context.Context, offset int64) error {
	var printed int64
	var last *replicadv1.ConsumeResponse
	printedJSON := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := c.poll(ctx, offset)
		if err != nil {
			return err
		}
		last = resp
		if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			if c.e.jsonOutput() {
				_ = c.e.printJSON(resp)
			}
			return answerError{fmt.Sprintf("consume %s-%d at offset %d: %s", c.topic, c.partition, offset, codeName(resp.GetErrorCode()))}
		}
		records := resp.GetRecords()
		if c.maxRecords > 0 && int64(len(records)) > c.maxRecords-printed {
			records = records[:c.maxRecords-printed]
			resp.Records = records
		}
		if len(records) > 0 {
			if err := c.print(resp); err != nil {
				return err
			}
			printedJSON = true
			printed += int64(len(records))
		}
		next := resp.GetNextOffset()
		if len(records) > 0 && c.maxRecords > 0 && printed >= c.maxRecords {
			return nil
		}
		if next < offset {
			next = offset // an empty answer never moves the position back
		}
		if len(records) > 0 {
			next = max(next, records[len(records)-1].GetOffset()+1)
		}
		offset = next
		// Everything below the HW has been read: that is the end without --follow.
		if !c.follow && offset >= resp.GetHighWatermark() {
			break
		}
	}
	if c.e.jsonOutput() && !printedJSON {
		return c.e.printJSON(last) // show where the partition stands
	}
	return nil
}

// poll reads from offset on the partition's leader; with --controller a
// leader change is followed (leaderRouter.do), continuing at offset.
func (c *consumer) poll(ctx context.Context, offset int64) (*replicadv1.ConsumeResponse, error) {
	wait := time.Duration(c.maxWaitMs) * time.Millisecond
	req := &replicadv1.ConsumeRequest{Topic: c.topic, Partition: c.partition, Offset: offset, MaxBytes: c.maxBytes, MaxWaitMs: c.maxWaitMs}
	if c.follow {
		req.MinBytes = 1 // hold the poll until something arrives (or max wait)
	}
	var resp *replicadv1.ConsumeResponse
	err := c.router.do(ctx, partitionKey{c.topic, c.partition}, func(ctx context.Context, lc replicadv1.LogServiceClient) (replicadv1.ErrorCode, error) {
		rctx, cancel := c.e.rpcContextWithWait(ctx, wait)
		defer cancel()
		r, err := lc.Consume(rctx, req)
		if err != nil {
			return 0, err
		}
		resp = r
		return r.GetErrorCode(), nil
	})
	return resp, err
}

func (c *consumer) print(resp *replicadv1.ConsumeResponse) error {
	if c.e.jsonOutput() {
		return c.e.printJSON(resp)
	}
	for _, r := range resp.GetRecords() {
		if _, err := fmt.Fprintf(c.e.stdout, "%d\t%s\n", r.GetOffset(), r.GetValue()); err != nil {
			return err
		}
	}
	return nil
}
