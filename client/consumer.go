package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Start offsets a Consumer takes besides an offset of 0 or more (the
// ConsumeRequest's own -1 and -2).
const (
	// OffsetLatest starts at the high watermark: only records produced
	// from now on.
	OffsetLatest int64 = -1
	// OffsetEarliest starts at the log start offset: every record the
	// partition still holds.
	OffsetEarliest int64 = -2
)

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	Topic string
	// Partitions to read; nil: every partition of the topic.
	Partitions []int32
	// Offset is where every partition starts: an offset, OffsetEarliest
	// or OffsetLatest. The zero value is offset 0.
	Offset int64
	// MaxBytes bounds one poll's answer; 0: 1 MiB.
	MaxBytes int32
	// MaxWait is how long the leader holds a poll that has nothing to
	// return (a long poll); 0: it answers at once.
	MaxWait time.Duration
}

// Consumer reads committed records (below the high watermark) of a
// topic's partitions from their leaders, following leader changes. It is
// not safe for concurrent use.
type Consumer struct {
	c     *Client
	cfg   ConsumerConfig
	parts []*consumed
	next  int // the partition Poll asks next
}

type consumed struct {
	partition int32
	offset    int64 // next to read; < 0 until resolved
	hw        int64 // from the last answer; -1: none yet
	logStart  int64
}

// Fetch is one partition's answer to a poll.
type Fetch struct {
	Partition      int32
	Records        []*Record
	HighWatermark  int64
	LogStartOffset int64
	// Response is the broker's answer as it came (ctlclient -o json
	// prints it).
	Response *replicadv1.ConsumeResponse
}

// NewConsumer makes a Consumer; with no Partitions it asks the topic's
// partition count.
func NewConsumer(ctx context.Context, c *Client, cfg ConsumerConfig) (*Consumer, error) {
	if cfg.Topic == "" {
		return nil, errors.New("client: consumer without a Topic")
	}
	if cfg.Offset < OffsetEarliest {
		return nil, fmt.Errorf("client: start offset %d: want an offset, OffsetEarliest (-2) or OffsetLatest (-1)", cfg.Offset)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = 1 << 20
	}
	parts := cfg.Partitions
	if parts == nil {
		n, err := c.Partitions(ctx, cfg.Topic)
		if err != nil {
			return nil, err
		}
		for p := range n {
			parts = append(parts, p)
		}
	}
	k := &Consumer{c: c, cfg: cfg}
	for _, p := range parts {
		if p < 0 {
			return nil, fmt.Errorf("client: partition %d", p)
		}
		k.parts = append(k.parts, &consumed{partition: p, offset: cfg.Offset, hw: -1})
	}
	return k, nil
}

// Partitions are the partitions read.
func (k *Consumer) Partitions() []int32 {
	out := make([]int32, len(k.parts))
	for i, p := range k.parts {
		out[i] = p.partition
	}
	return out
}

// Position is the next offset Poll reads of partition (-1 or -2 before the
// first answer resolved latest or earliest).
func (k *Consumer) Position(partition int32) int64 {
	for _, p := range k.parts {
		if p.partition == partition {
			return p.offset
		}
	}
	return -1
}

// CaughtUp reports whether every partition was read up to the high
// watermark its last answer named.
func (k *Consumer) CaughtUp() bool {
	for _, p := range k.parts {
		if p.hw < 0 || p.offset < p.hw {
			return false
		}
	}
	return true
}

// Poll asks the next partition (round-robin, those not caught up first)
// for its records from its position and advances it past them. An error
// code in the answer comes back as *Error (OFFSET_OUT_OF_RANGE names the
// partition's valid range), the answer with it.
func (k *Consumer) Poll(ctx context.Context) (Fetch, error) {
	p := k.pick()
	return k.poll(ctx, p)
}

func (k *Consumer) pick() *consumed {
	n := len(k.parts)
	for i := range n {
		p := k.parts[(k.next+i)%n]
		if p.hw < 0 || p.offset < p.hw {
			k.next = (k.next + i + 1) % n
			return p
		}
	}
	p := k.parts[k.next%n]
	k.next = (k.next + 1) % n
	return p
}

func (k *Consumer) poll(ctx context.Context, p *consumed) (Fetch, error) {
	tp := TopicPartition{k.cfg.Topic, p.partition}
	req := &replicadv1.ConsumeRequest{Topic: tp.Topic, Partition: tp.Partition, Offset: p.offset, MaxBytes: k.cfg.MaxBytes,
		MaxWaitMs: int32(k.cfg.MaxWait.Milliseconds())}
	if k.cfg.MaxWait > 0 {
		req.MinBytes = 1 // hold the poll until something arrives (or max wait)
	}
	resp, err := k.consume(ctx, tp, req)
	if err != nil && p.offset < 0 && status.Code(err) == codes.InvalidArgument {
		// A broker that predates Consume's -1 and -2: learn the partition's
		// range from an answer at offset 0 and start from it.
		probe := &replicadv1.ConsumeRequest{Topic: tp.Topic, Partition: tp.Partition, MaxBytes: 1}
		var presp *replicadv1.ConsumeResponse
		presp, err = k.consume(ctx, tp, probe)
		if err == nil {
			if p.offset == OffsetLatest {
				p.offset = presp.GetHighWatermark()
			} else {
				p.offset = presp.GetLogStartOffset()
			}
			return k.poll(ctx, p)
		}
	}
	f := Fetch{Partition: p.partition, Response: resp}
	if err != nil {
		return f, err
	}
	f.HighWatermark, f.LogStartOffset = resp.GetHighWatermark(), resp.GetLogStartOffset()
	if code := resp.GetErrorCode(); code != replicadv1.ErrorCode_ERROR_CODE_NONE {
		e := &Error{Code: code, Op: fmt.Sprintf("consume %s at offset %d", tp, p.offset), Partition: tp}
		if code == replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
			e.Message = fmt.Sprintf("the partition holds offsets [%d, %d) (log start, high watermark)", resp.GetLogStartOffset(), resp.GetHighWatermark())
		}
		return f, e
	}
	p.hw, p.logStart = resp.GetHighWatermark(), resp.GetLogStartOffset()
	for _, r := range resp.GetRecords() {
		f.Records = append(f.Records, fromConsumed(tp.Topic, tp.Partition, r))
	}
	next := resp.GetNextOffset()
	if p.offset < 0 && len(f.Records) == 0 {
		// The broker resolved earliest or latest and returned nothing:
		// next_offset is where it stands.
		switch {
		case next > 0:
			p.offset = next
		case req.Offset == OffsetLatest:
			p.offset = p.hw
		default:
			p.offset = p.logStart
		}
		return f, nil
	}
	if next < p.offset {
		next = p.offset // an empty answer never moves the position back
	}
	if len(f.Records) > 0 {
		next = max(next, f.Records[len(f.Records)-1].Offset+1)
	}
	p.offset = next
	return f, nil
}

func (k *Consumer) consume(ctx context.Context, tp TopicPartition, req *replicadv1.ConsumeRequest) (*replicadv1.ConsumeResponse, error) {
	var resp *replicadv1.ConsumeResponse
	err := k.c.Call(ctx, tp.Topic, tp.Partition, func(ctx context.Context, lc replicadv1.LogServiceClient) (replicadv1.ErrorCode, error) {
		rctx, cancel := k.c.requestContext(ctx, k.cfg.MaxWait)
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

// Seek sets partition's next offset (an offset, OffsetEarliest or
// OffsetLatest).
func (k *Consumer) Seek(partition int32, offset int64) {
	for _, p := range k.parts {
		if p.partition == partition {
			p.offset, p.hw = offset, -1
		}
	}
}
