package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/replicad/replicad/core/topicconfig"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Retention in the workload (issue 22): the operator shortens the topic's
// retention (retention.bytes and retention.ms, on virtual time) and runs
// the retention check now at a broker (RunRetention, ctlclient retention
// run), while the brokers' periodic check runs every
// simRetentionCheckInterval. What the checker holds against it:
//
//   - every answer is one of the codes the contract names, its log start
//     never goes back, and it names a reason exactly when it deleted;
//   - retention deletes only committed records: every record below the
//     log start a RunRetention raised was seen committed (checkRetention);
//   - followers converge: once healed, every ISR member's log start is at
//     or above its leader's (they follow it at each fetch), or healing
//     fails for liveness.
//
// The acknowledged-record checks already spare what is below a replica's
// log start (checkAcked), as for DeleteRecords.

// simRetentionCheckInterval is the brokers' --log-retention-check-interval
// with retention in the workload (5 minutes otherwise: never within a
// run): a check or two a run, with RunRetention finding work between them.
const simRetentionCheckInterval = 12 * time.Second

// topicConfigs are the topic's configs at its creation: with retention in
// the workload, a retention.bytes under a segment (4 KiB: every segment
// rolled and committed may go) and a retention.ms of a few virtual
// seconds, so that checks delete, by both.
func (s *Sim) topicConfigs() map[string]string {
	if !s.retentionOn() {
		return nil
	}
	return map[string]string{topicconfig.RetentionBytes: "1024", topicconfig.RetentionMs: "5000"}
}

// retentionOn says whether retention is in the workload: not in the plain
// one, nor with Config.NoRetention (the findings keep their schedules).
func (s *Sim) retentionOn() bool { return !s.cfg.Plain && !s.cfg.NoRetention }

// retentionDeletion is one replica's log start raised by a RunRetention.
type retentionDeletion struct {
	inc           incarnation
	broker        int32
	before, after int64
}

var retentionCodes = []replicadv1.ErrorCode{
	replicadv1.ErrorCode_ERROR_CODE_NONE,
	replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER,
	replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
	replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR,
	replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE,
}

var retentionReasons = []string{"retention.ms", "retention.bytes", "log-start-offset"}

// runRetentionOp runs the retention check now at one broker, for the
// whole topic or one partition.
func (s *Sim) runRetentionOp() (string, func(context.Context)) {
	b := int32(1 + s.rng.IntN(len(s.brokers)))
	req := &replicadv1.RunRetentionRequest{Topic: topic}
	what := fmt.Sprintf("run retention at broker %d", b)
	if s.rng.IntN(2) == 0 {
		p := int32(s.rng.IntN(s.cfg.Partitions))
		req.Partition = &p
		what += fmt.Sprintf(" for %d", p)
	}
	// The incarnation the answer is about: the operator alone deletes the
	// topic, one command at a time.
	id := ""
	if sp, err := s.ctl.store.Partition(context.Background(), topic, 0); err == nil {
		id = sp.TopicID
	}
	return what, func(ctx context.Context) {
		resp, err := invoke[*replicadv1.RunRetentionResponse](ctx, s.op.brokerConn(b), "RunRetention", req)
		code := replicadv1.ErrorCode_ERROR_CODE_NONE
		var broken []string
		var deleted []retentionDeletion
		for _, r := range resp.GetResults() {
			if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE && code == replicadv1.ErrorCode_ERROR_CODE_NONE {
				code = r.GetErrorCode()
			}
			if msg := checkRetentionResult(b, req, r); msg != "" {
				broken = append(broken, msg)
				continue
			}
			if r.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE && r.GetLogStartOffsetAfter() > r.GetLogStartOffsetBefore() {
				deleted = append(deleted, retentionDeletion{inc: incarnation{tp.TopicPartition{Topic: r.GetTopic(), Partition: r.GetPartition()}, id},
					broker: b, before: r.GetLogStartOffsetBefore(), after: r.GetLogStartOffsetAfter()})
			}
		}
		s.op.note("run-retention", code, err)
		if len(deleted) > 0 {
			s.op.note("run-retention-deleted", code, err)
		}
		s.op.mu.Lock()
		s.op.broken = append(s.op.broken, broken...)
		s.op.retention = append(s.op.retention, deleted...)
		s.op.mu.Unlock()
	}
}

// checkRetentionResult is what one answer must be by itself.
func checkRetentionResult(b int32, req *replicadv1.RunRetentionRequest, r *replicadv1.RetentionResult) string {
	where := fmt.Sprintf("run retention at broker %d: %s-%d", b, r.GetTopic(), r.GetPartition())
	switch {
	case r.GetTopic() != req.GetTopic() || req.Partition != nil && r.GetPartition() != req.GetPartition():
		return where + ": a partition not asked for"
	case !slices.Contains(retentionCodes, r.GetErrorCode()):
		return fmt.Sprintf("%s: error code %s (%s)", where, r.GetErrorCode(), r.GetErrorMessage())
	case r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
		return ""
	case r.GetLogStartOffsetAfter() < r.GetLogStartOffsetBefore():
		return fmt.Sprintf("%s: log start went back from %d to %d", where, r.GetLogStartOffsetBefore(), r.GetLogStartOffsetAfter())
	case (r.GetDeletedSegments() > 0) != (r.GetReason() != "") || r.GetDeletedSegments() < 0 || r.GetDeletedBytes() < 0:
		return fmt.Sprintf("%s: deleted %d segments (%d bytes) for reason %q", where, r.GetDeletedSegments(), r.GetDeletedBytes(), r.GetReason())
	case r.GetLogStartOffsetAfter() > r.GetLogStartOffsetBefore() && r.GetDeletedSegments() == 0:
		return fmt.Sprintf("%s: log start raised from %d to %d without deleting", where, r.GetLogStartOffsetBefore(), r.GetLogStartOffsetAfter())
	}
	for _, why := range strings.Split(r.GetReason(), ",") {
		if why != "" && !slices.Contains(retentionReasons, why) {
			return fmt.Sprintf("%s: reason %q", where, r.GetReason())
		}
	}
	return ""
}

// retentionConfigOp shortens the topic's retention, or gives it back.
func (s *Sim) retentionConfigOp() (string, func(context.Context)) {
	req := &replicadv1.AlterTopicConfigRequest{Topic: topic}
	switch s.rng.IntN(5) {
	case 0:
		req.Delete = []string{topicconfig.RetentionBytes, topicconfig.RetentionMs}
	case 1:
		req.Set = map[string]string{topicconfig.RetentionBytes: "2048"}
	case 2:
		req.Set = map[string]string{topicconfig.RetentionBytes: "8192"}
	case 3:
		req.Set = map[string]string{topicconfig.RetentionMs: "3000"}
	default:
		req.Set = map[string]string{topicconfig.RetentionMs: "10000", topicconfig.RetentionBytes: "-1"}
	}
	what := "alter-config delete retention"
	if req.Set != nil {
		var kv []string
		for _, k := range []string{topicconfig.RetentionBytes, topicconfig.RetentionMs} {
			if v, ok := req.Set[k]; ok {
				kv = append(kv, k+"="+v)
			}
		}
		what = "alter-config " + strings.Join(kv, ",")
	}
	return what, func(ctx context.Context) {
		resp, err := invoke[*replicadv1.AlterTopicConfigResponse](ctx, s.op.conn, "AlterTopicConfig", req)
		s.op.note("alter-config-retention", resp.GetErrorCode(), err)
	}
}

// checkRetention: every record a RunRetention deleted was committed. The
// deletions are drained at the checker's next pass after the answer: the
// deletion ran in an earlier step than this pass, and every HW it could
// have seen was set in a step before it, whose pass recorded the records
// below it in the committed log (the HW a replica reports afterwards is no
// witness: it is never below its log start).
func (c *checker) checkRetention(s *Sim) {
	s.op.mu.Lock()
	ds := s.op.retention
	s.op.retention = nil
	s.op.mu.Unlock()
	for _, d := range ds {
		for o := d.before; o < d.after; o++ {
			if _, ok := c.committed[d.inc][o]; !ok {
				c.fail("retention deleted uncommitted records: broker %d raised %s's log start from %d to %d, but offset %d was never committed (committed HW %d)",
					d.broker, d.inc, d.before, d.after, o, c.committedHW[d.inc])
				break
			}
		}
	}
}

// checkLogStartRaise: a replica's log start (in one life) passes committed
// records only, whoever raised it: retention (periodic or RunRetention),
// DeleteRecords, a follower following its leader's, or starting over at
// it. The records below the old log start it passed were all seen
// committed (see checkRetention for why the passes cannot miss them).
func (c *checker) checkLogStartRaise(k replicaKey, from, to int64) {
	for o := from; o < to; o++ {
		if _, ok := c.committed[k.t][o]; !ok {
			c.fail("log start passed uncommitted records: broker %d (life %d) raised %s's log start from %d to %d, but offset %d was never committed (committed HW %d)",
				k.broker, k.life, k.t, from, to, o, c.committedHW[k.t])
			return
		}
	}
}

// logStartsFollowed is "" once every ISR follower's log start is at or
// above its leader's (with retention in the workload; always "" without).
func (s *Sim) logStartsFollowed() string {
	if !s.retentionOn() {
		return ""
	}
	parts, err := s.ctl.store.Partitions(context.Background())
	if err != nil {
		return "store: " + err.Error()
	}
	for _, p := range parts {
		if p.Leader < 1 || int(p.Leader) > len(s.brokers) || s.brokers[p.Leader-1].cur == nil {
			continue // healthy says so
		}
		part := p.Partition
		ld := s.brokers[p.Leader-1].cur.rm.Describe(p.Topic, &part)
		if len(ld.Partitions) != 1 {
			continue
		}
		start := ld.Partitions[0].LogStartOffset
		for _, r := range p.ISR {
			if r == p.Leader || int(r) > len(s.brokers) || s.brokers[r-1].cur == nil {
				continue
			}
			fd := s.brokers[r-1].cur.rm.Describe(p.Topic, &part)
			if len(fd.Partitions) == 1 && fd.Partitions[0].LogStartOffset < start {
				return fmt.Sprintf("follower %d of %s-%d at log start %d, below its leader %d's %d", r, p.Topic, p.Partition,
					fd.Partitions[0].LogStartOffset, p.Leader, start)
			}
		}
	}
	return ""
}
