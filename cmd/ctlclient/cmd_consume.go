package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/replicad/replicad/client"
)

func consumeCommand() *command {
	return &command{
		name:    "consume",
		summary: "read committed records (below the HW) from a partition, or from every partition of a topic",
		usage: "--topic T [--partition P] [--offset earliest|latest|N] [--max-records N] [--follow] [--max-wait-ms N] [--max-bytes N]\n" +
			"       [--print-partition] [--print-key] [--print-headers] [--print-timestamp] [--print-producer]",
		details: `Prints "offset<TAB>value" a line; without --partition it reads every
partition of the topic and prints "partition<TAB>offset<TAB>value".
--print-timestamp, --print-key, --print-headers (key=value,...) and
--print-producer (producer ID, epoch and sequence) add those columns, in
that order, before the value. -o json: each ConsumeResponse that carried
records (without --partition: {"partition": P, "response": ...}).

--offset is where every partition starts: an offset (default 0), earliest
(the log start offset) or latest (the high watermark: only records produced
from now on). Stops at the high watermark (of every partition), or after
--max-records; with --follow it keeps long-polling for new records until
interrupted (Ctrl-C, exit 0). Exits 1 on an error code
(OFFSET_OUT_OF_RANGE, which names the partition's valid range
[log start, high watermark), NOT_LEADER_OR_FOLLOWER, ...).

With --bootstrap the partition's leader is found in a broker's Metadata
(the controller may be down), with --controller from the controller,
rather than --broker; a poll answered NOT_LEADER_OR_FOLLOWER,
LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH or UNKNOWN_TOPIC_OR_PARTITION, or
whose leader cannot be reached, is repeated at the same offset on the leader
a fresh lookup names (backoff 100ms doubling to 1s, for up to --timeout
and 20 attempts):
a --follow survives leader changes.`,
		example: "ctlclient consume --topic orders --partition 0\nctlclient consume --topic orders --partition 0 --offset 100 --follow\nctlclient --bootstrap 127.0.0.1:9091 consume --topic orders --offset earliest --print-key --print-headers\nctlclient --controller 127.0.0.1:9090 consume --topic orders --partition 2 --offset latest --follow",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition (default: every partition of the topic)")
			offsetFlag := fs.String("offset", "0", "first offset to read: N, earliest or latest")
			maxRecords := fs.Int64("max-records", 0, "stop after this many records; 0: no limit")
			follow := fs.Bool("follow", false, "keep waiting for new records at the high watermark")
			maxWaitMs := int32Var(fs, "max-wait-ms", 1000, "with --follow, how long the broker holds a poll that has nothing")
			maxBytes := int32Var(fs, "max-bytes", 1<<20, "most bytes per poll")
			var pf printFlags
			fs.BoolVar(&pf.partition, "print-partition", false, "print each record's partition (the default without --partition)")
			fs.BoolVar(&pf.timestamp, "print-timestamp", false, "print each record's timestamp (UTC)")
			fs.BoolVar(&pf.key, "print-key", false, "print each record's key")
			fs.BoolVar(&pf.headers, "print-headers", false, "print each record's headers as key=value,...")
			fs.BoolVar(&pf.producer, "print-producer", false, "print each record's producer ID, epoch and sequence (idempotent produce)")
			return func(ctx context.Context, e *env) error {
				set := setFlags(fs)
				if err := requireFlags(fs, "topic"); err != nil {
					return err
				}
				offset, err := parseOffset(*offsetFlag)
				if err != nil {
					return err
				}
				if *maxRecords < 0 || *maxWaitMs < 0 || *maxBytes < 0 {
					return usagef("--max-records, --max-wait-ms and --max-bytes must not be negative")
				}
				if set["partition"] && *partition < 0 {
					return usagef("--partition must not be negative (got %d)", *partition)
				}
				whole := !set["partition"]
				if whole && !set["print-partition"] {
					pf.partition = true
				}
				cl, err := e.newClient()
				if err != nil {
					return err
				}
				defer cl.Close()
				cfg := client.ConsumerConfig{Topic: *topic, Offset: offset, MaxBytes: *maxBytes}
				if !whole {
					cfg.Partitions = []int32{*partition}
				}
				if *follow {
					cfg.MaxWait = time.Duration(*maxWaitMs) * time.Millisecond
				}
				k, err := client.NewConsumer(ctx, cl, cfg)
				if err != nil {
					return err
				}
				if whole && *follow && len(k.Partitions()) > 1 {
					// The partitions are polled in turn: a long poll on one
					// must not hold the others up for long.
					cfg.MaxWait = min(cfg.MaxWait, 100*time.Millisecond)
					if k, err = client.NewConsumer(ctx, cl, cfg); err != nil {
						return err
					}
				}
				c := &consumer{e: e, k: k, whole: whole, follow: *follow, maxRecords: *maxRecords, print: pf}
				err = c.run(ctx)
				if *follow && ctx.Err() != nil && (errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled) {
					return nil // interrupting a follow is its normal end
				}
				return err
			}
		},
	}
}

// parseOffset reads --offset: N (0 or more), earliest or latest.
func parseOffset(s string) (int64, error) {
	switch s {
	case "earliest":
		return client.OffsetEarliest, nil
	case "latest":
		return client.OffsetLatest, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, usagef("--offset: want an offset (0 or more), earliest or latest (got %q)", s)
	}
	return n, nil
}

// printFlags are the optional columns of consume's output.
type printFlags struct {
	partition, timestamp, key, headers, producer bool
}

type consumer struct {
	e          *env
	k          *client.Consumer
	whole      bool
	follow     bool
	maxRecords int64
	print      printFlags
}

func (c *consumer) run(ctx context.Context) error {
	var printed int64
	var last client.Fetch
	printedJSON := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := c.k.Poll(ctx)
		var cerr *client.Error
		if errors.As(err, &cerr) {
			if c.e.jsonOutput() && f.Response != nil {
				_ = c.printJSON(f)
			}
			msg := cerr.Op + ": " + codeName(cerr.Code)
			if cerr.Message != "" {
				msg += ": " + cerr.Message
			}
			return answerError{msg}
		}
		if err != nil {
			return err
		}
		last = f
		if c.maxRecords > 0 && int64(len(f.Records)) > c.maxRecords-printed {
			f.Records = f.Records[:c.maxRecords-printed]
			f.Response.Records = f.Response.Records[:len(f.Records)]
		}
		if len(f.Records) > 0 {
			if err := c.printFetch(f); err != nil {
				return err
			}
			printedJSON = true
			printed += int64(len(f.Records))
			if c.maxRecords > 0 && printed >= c.maxRecords {
				return nil
			}
		}
		// Everything below the HW has been read: that is the end without --follow.
		if !c.follow && c.k.CaughtUp() {
			break
		}
	}
	if c.e.jsonOutput() && !printedJSON && last.Response != nil {
		return c.printJSON(last) // show where the partition stands
	}
	return nil
}

func (c *consumer) printJSON(f client.Fetch) error {
	if !c.whole {
		return c.e.printJSON(f.Response)
	}
	resp, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(f.Response)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	return c.e.printJSONValue(struct {
		Partition int32           `json:"partition"`
		Response  json.RawMessage `json:"response"`
	}{f.Partition, resp})
}

func (c *consumer) printFetch(f client.Fetch) error {
	if c.e.jsonOutput() {
		return c.printJSON(f)
	}
	var b strings.Builder
	for _, r := range f.Records {
		if c.print.partition {
			fmt.Fprintf(&b, "%d\t", r.Partition)
		}
		fmt.Fprintf(&b, "%d\t", r.Offset)
		if c.print.timestamp {
			b.WriteString(r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00") + "\t")
		}
		if c.print.key {
			b.Write(r.Key)
			b.WriteByte('\t')
		}
		if c.print.headers {
			for i, h := range r.Headers {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%s=%s", h.Key, h.Value)
			}
			b.WriteByte('\t')
		}
		if c.print.producer {
			fmt.Fprintf(&b, "%d/%d/%d\t", r.ProducerID, r.ProducerEpoch, r.Sequence)
		}
		b.Write(r.Value)
		b.WriteByte('\n')
	}
	_, err := fmt.Fprint(c.e.stdout, b.String())
	return err
}
