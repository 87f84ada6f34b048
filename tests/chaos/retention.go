package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// DefaultRetentionPercent is the share of fault rounds during which the
// retention check is run now (ctlclient retention run) on the round's
// partition, with its topic's retention.ms at 1 for the time.
const DefaultRetentionPercent = 20

// retentionSegmentBytes is the topic's segment.bytes when retention runs
// (RetentionPercent > 0): small enough that a partition has segments to
// delete within a round (retention never deletes the active one).
const retentionSegmentBytes = 64 << 10

// RetentionSchedule draws, for each of rounds fault rounds, whether the
// retention check runs now during its fault, and when: nil entries are
// none. A stream of its own, as DeleteSchedule's, so the other schedules
// of a seed stay as they were.
func RetentionSchedule(seed uint64, rounds, percent int) []*time.Duration {
	r := rand.New(rand.NewPCG(seed, 0x4e7))
	out := make([]*time.Duration, rounds)
	for i := range rounds {
		x, after := r.IntN(100), time.Duration(300+r.IntN(2700))*time.Millisecond
		if x < percent {
			out[i] = &after
		}
	}
	return out
}

func setRetentionMs(v string) func(context.Context, replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
	return func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
		req := &replicadv1.AlterTopicConfigRequest{Topic: Topic}
		if v == "" {
			req.Delete = []string{"retention.ms"}
		} else {
			req.Set = map[string]string{"retention.ms": v}
		}
		r, err := ctl.AlterTopicConfig(ctx, req)
		return r.GetErrorCode(), r.GetErrorMessage(), err
	}
}

// runRetention runs the retention check now for partition p, during a
// fault round, with the topic's retention.ms at 1 (every segment but the
// active one, below the HW, is past it): first on its leader, once the
// config has reached it (with the controller's UpdateMetadata), then on
// the other brokers, whose replicas check their own segments. Records go as with DeleteRecords: writes in doubt meet a
// log whose start moved, and the checker compares from the log start. A
// fault may keep it from being carried out (no finding).
func (n *nemesis) runRetention(ctx context.Context, p int32) error {
	if _, err := n.callCtl(ctx, "alter-config retention.ms=1", 10*time.Second, setRetentionMs("1")); err != nil {
		return err
	}
	defer func() {
		// Back to the brokers' default whatever happened, even once the
		// run's context is done: a later round must not find it at 1.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 40*time.Second)
		defer cancel()
		if _, err := n.callCtl(rctx, "alter-config delete retention.ms", 30*time.Second, setRetentionMs("")); err != nil {
			n.h.note("operator", "retention.ms left at 1: %v", err)
		}
	}()
	var leader int32
	err := retryFor(ctx, 10*time.Second, func() error {
		l := n.w.leader(ctx, p, true)
		if l <= 0 {
			return fmt.Errorf("partition %d has no leader", p)
		}
		cctx, cancel := context.WithTimeout(ctx, 6*time.Second)
		defer cancel()
		d, err := n.c.replicaManager(l).DescribePartitions(cctx, &replicadv1.DescribePartitionsRequest{Topic: Topic, Partition: &p})
		if err != nil {
			return err
		}
		if len(d.GetPartitions()) != 1 || d.GetPartitions()[0].GetTopicConfig()["retention.ms"] != "1" {
			return fmt.Errorf("retention.ms=1 has not reached partition %d's leader %d yet", p, l)
		}
		if _, err := n.retentionOn(ctx, l, p); err != nil {
			return err
		}
		leader = l
		return nil
	})
	if err != nil {
		return err
	}
	for id := int32(1); id <= int32(len(n.c.brokers)); id++ {
		if id != leader {
			// Best effort: a broker under the round's fault may not answer,
			// nor one that has not taken the config yet.
			_, _ = n.retentionOn(ctx, id, p)
		}
	}
	return nil
}

// retentionOn is one RunRetention of partition p at broker b; an error
// code is an error.
func (n *nemesis) retentionOn(ctx context.Context, b, p int32) (*replicadv1.RetentionResult, error) {
	cctx, cancel := context.WithTimeout(ctx, 6*time.Second)
	defer cancel()
	resp, err := n.c.replicaManager(b).RunRetention(cctx, &replicadv1.RunRetentionRequest{Topic: Topic, Partition: &p})
	if err != nil {
		return nil, err
	}
	if len(resp.GetResults()) != 1 {
		return nil, fmt.Errorf("retention run of partition %d on broker %d: %d results", p, b, len(resp.GetResults()))
	}
	r := resp.GetResults()[0]
	if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return nil, fmt.Errorf("retention run of partition %d on broker %d: %v %s", p, b, r.GetErrorCode(), r.GetErrorMessage())
	}
	n.h.note("operator", "retention run: partition %d on broker %d (%v): log start %d -> %d, %d segments, %d bytes (%s)", p, b,
		r.GetRole(), r.GetLogStartOffsetBefore(), r.GetLogStartOffsetAfter(), r.GetDeletedSegments(), r.GetDeletedBytes(), r.GetReason())
	return r, nil
}
