package chaos

import (
	"context"
	"fmt"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Adding partitions (CreatePartitions, ctlclient alter-topic) under the
// nemesis. A round followed by an OpRecreate extra adds a partition to
// ScratchTopic a second into its fault, as an operator racing a failure
// would (the controller may be killed or paused, the store write's outcome
// unknown: no finding if it is not carried out). The OpRecreate round then
// checks that every partition the controller holds for ScratchTopic is
// served (checkScratchServed: a leader, a full ISR, an acks=all record
// written and read back), whatever the fault did to the change, before it
// deletes the topic; and once it created the topic again, it grows it by
// two with the cluster healed, which must work and be served.

// growScratch adds by partitions to ScratchTopic (creating it first if it
// is missing), retrying for d as an operator would; a retry answered
// INVALID_PARTITIONS finds its earlier attempt applied, which is checked
// against the count the controller then holds.
func (n *nemesis) growScratch(ctx context.Context, by int32, d time.Duration) (from, to int32, err error) {
	if _, err := n.callCtl(ctx, "create "+ScratchTopic+" to grow", d, func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
		r, err := ctl.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: ScratchTopic, Partitions: 1, ReplicationFactor: 3})
		return r.GetErrorCode(), r.GetErrorMessage(), err
	}, replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS); err != nil {
		return 0, 0, err
	}
	count := func() (int32, error) {
		_, resp, err := n.control(ctx)
		if err != nil {
			return 0, err
		}
		k := int32(0)
		for partitionOf(resp, ScratchTopic, k) != nil {
			k++
		}
		return k, nil
	}
	if err := retryFor(ctx, d, func() (err error) { from, err = count(); return err }); err != nil {
		return 0, 0, err
	}
	to = from + by
	what := fmt.Sprintf("alter-topic %s --partitions %d (from %d)", ScratchTopic, to, from)
	if _, err := n.callCtl(ctx, what, d, func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
		r, err := ctl.CreatePartitions(ctx, &replicadv1.CreatePartitionsRequest{Topic: ScratchTopic, Count: to})
		if err == nil && r.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE && len(r.GetPartitions()) != int(by) {
			return r.GetErrorCode(), "", fmt.Errorf("answered NONE with %d partitions added, want %d", len(r.GetPartitions()), by)
		}
		return r.GetErrorCode(), r.GetErrorMessage(), err
	}, replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS); err != nil {
		return from, to, err
	}
	got, err := count()
	if err != nil {
		return from, to, err
	}
	if got < to {
		return from, to, opError{fmt.Errorf("%s answered, yet the controller holds %d partitions", what, got)}
	}
	return from, to, nil
}

// checkScratchServed checks every partition of ScratchTopic the controller
// holds: each gets a leader and a full ISR, takes an acks=all record, and
// its leader serves it back. A partition added but not served is a finding.
func (n *nemesis) checkScratchServed(ctx context.Context, tag string) error {
	_, resp, err := n.control(ctx)
	if err != nil {
		return err
	}
	for p := int32(0); partitionOf(resp, ScratchTopic, p) != nil; p++ {
		if err := n.waitPartition(ctx, ScratchTopic, p, 45*time.Second, "a leader and a full ISR", fullIsr); err != nil {
			return err
		}
		value := fmt.Sprintf("%s-p%d", tag, p)
		var offset int64
		if err := retryFor(ctx, 30*time.Second, func() error {
			_, resp, err := n.control(ctx)
			if err != nil {
				return err
			}
			cp := partitionOf(resp, ScratchTopic, p)
			if cp == nil || cp.GetLeader() <= 0 {
				return fmt.Errorf("%s-%d has no leader", ScratchTopic, p)
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			r, err := n.c.log(cp.GetLeader()).Produce(cctx, &replicadv1.ProduceRequest{Topic: ScratchTopic, Partition: p, Acks: -1, TimeoutMs: 3000,
				Records: []*replicadv1.Record{{Value: []byte(value)}}})
			if err != nil {
				return err
			}
			if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
				return fmt.Errorf("produce to %s-%d: %v", ScratchTopic, p, r.GetErrorCode())
			}
			offset = r.GetBaseOffset()
			return nil
		}); err != nil {
			return opError{fmt.Errorf("%s-%d (an added partition) takes no acks=all record within 30s: %w", ScratchTopic, p, err)}
		}
		if err := retryFor(ctx, 30*time.Second, func() error {
			_, resp, err := n.control(ctx)
			if err != nil {
				return err
			}
			cp := partitionOf(resp, ScratchTopic, p)
			if cp == nil || cp.GetLeader() <= 0 {
				return fmt.Errorf("%s-%d has no leader", ScratchTopic, p)
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			r, err := n.c.log(cp.GetLeader()).Consume(cctx, &replicadv1.ConsumeRequest{Topic: ScratchTopic, Partition: p, Offset: offset, MaxBytes: 1 << 20})
			if err != nil {
				return err
			}
			if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
				return fmt.Errorf("consume: %v", r.GetErrorCode())
			}
			for _, rec := range r.GetRecords() {
				if rec.GetOffset() == offset && string(rec.GetValue()) == value {
					return nil
				}
			}
			return fmt.Errorf("%s-%d offset %d: %q not read back", ScratchTopic, p, offset, value)
		}); err != nil {
			return opError{fmt.Errorf("%s-%d: an acknowledged record not served: %w", ScratchTopic, p, err)}
		}
	}
	n.ops["scratch partitions served"]++
	return nil
}
