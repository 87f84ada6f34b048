package service

import (
	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/protoconv"
)

// FetchSession is the leader's side of a fetch session (KIP-227): the
// partitions one follower stream fetches, so that its requests list only
// what changed and its answers only what is new. The stream is the session:
// it starts with the stream's first session request and ends with it, so
// there are no session ids or epochs to keep and no cache to evict.
//
// Every request still fetches every partition of the session with its last
// known fields, as Kafka's incremental fetch context does: the leader
// records each follower's fetch of each partition every round, so the ISR
// and HW logic (lastCaughtUpTime of an idle follower included) is exactly
// that of full requests. What the session saves is the wire: building,
// encoding, decoding and validating 10,000 entries each way per round.
//
// Not safe for concurrent use: a stream answers one request at a time.
type FetchSession struct {
	// parts are the session's partitions in fetch order: the leader shares
	// max_bytes across them in this order, and moves the ones served to the
	// end after each answer so none starves (the follower's rotation, which
	// a session request no longer conveys).
	parts []core.FetchPartition
	// sent is what the follower last heard of each partition, by its index
	// in parts; index maps a partition to it.
	sent  []sentState
	index map[tp.TopicPartition]int
}

// sentState is what the last answer carrying a partition said of it.
type sentState struct {
	known                bool // an answer carried it since it (re)joined
	hw, logStart, logEnd int64
}

// MaxFetchSessionPartitions bounds one session, so that a stream cannot grow
// the leader's memory without end by naming new partitions request after
// request. A full request has no such bound of its own (a fetcher serves all
// the partitions it follows from one leader, which may exceed
// MaxPartitionsPerRequest); this is twice the largest cluster issue 20 plans
// for (100,000 partitions).
const MaxFetchSessionPartitions = 200_000

// NewFetchSession returns an empty session.
func NewFetchSession() *FetchSession {
	return &FetchSession{index: make(map[tp.TopicPartition]int)}
}

// Len is the number of partitions in the session.
func (s *FetchSession) Len() int { return len(s.parts) }

// Apply merges a validated session request into the session and returns the
// core request fetching all of its partitions. A partition the request names
// is answered whatever changed (the follower may have a new state for it);
// a removed one leaves. It reports InvalidArgument when the session would
// exceed MaxFetchSessionPartitions partitions.
func (s *FetchSession) Apply(req *replicadv1.FetchRequest) (core.FetchRequest, error) {
	if rm := req.GetRemovedPartitions(); len(rm) > 0 {
		drop := make(map[tp.TopicPartition]bool, len(rm))
		for _, r := range rm {
			drop[protoconv.TopicPartition(r.GetTopic(), r.GetPartition())] = true
		}
		s.keep(func(fp core.FetchPartition) bool { return !drop[fp.TopicPartition] })
	}
	for _, p := range req.GetPartitions() {
		fp := protoconv.FetchPartitionFromProto(p)
		if i, ok := s.index[fp.TopicPartition]; ok {
			s.parts[i], s.sent[i] = fp, sentState{}
			continue
		}
		s.index[fp.TopicPartition] = len(s.parts)
		s.parts = append(s.parts, fp)
		s.sent = append(s.sent, sentState{})
	}
	if len(s.parts) > MaxFetchSessionPartitions {
		return core.FetchRequest{}, invalid("partitions", "the fetch session holds %d partitions, over the limit of %d", len(s.parts), MaxFetchSessionPartitions)
	}
	out := protoconv.FetchRequestHeaderFromProto(req)
	out.Partitions = s.parts
	return out, nil
}

// keep keeps the partitions keep says to, in order, and reindexes.
func (s *FetchSession) keep(keep func(core.FetchPartition) bool) {
	n := 0
	for i, fp := range s.parts {
		if !keep(fp) {
			delete(s.index, fp.TopicPartition)
			continue
		}
		s.parts[n], s.sent[n] = fp, s.sent[i]
		s.index[fp.TopicPartition] = n
		n++
	}
	clear(s.parts[n:])
	s.parts, s.sent = s.parts[:n], s.sent[:n]
}

// Answer turns the core answer to the request Apply returned (one result
// per session partition, in order) into the session's answer: only the
// partitions with something new, and session set. It then moves the
// partitions that got records to the end of the fetch order.
func (s *FetchSession) Answer(correlationID int64, resp core.FetchResponse) *replicadv1.FetchResponse {
	out := &replicadv1.FetchResponse{CorrelationId: correlationID, Session: true}
	served := 0
	for i := range resp.Partitions {
		r := &resp.Partitions[i]
		st := &s.sent[i]
		if st.known && r.Error == core.ErrNone && r.DivergingEpoch == nil && len(r.Records) == 0 &&
			r.HighWatermark == st.hw && r.LogStartOffset == st.logStart && r.LogEndOffset == st.logEnd {
			continue
		}
		// An error is answered each time: the follower sets the partition
		// aside or delays it, which removes it from the session.
		*st = sentState{known: r.Error == core.ErrNone && r.DivergingEpoch == nil,
			hw: r.HighWatermark, logStart: r.LogStartOffset, logEnd: r.LogEndOffset}
		out.Partitions = append(out.Partitions, protoconv.FetchResultToProto(r))
		if len(r.Records) > 0 {
			served++
		}
	}
	if served > 0 && served < len(s.parts) {
		s.moveServedToEnd(resp)
	}
	return out
}

// moveServedToEnd is Kafka's PartitionStates.updateAndMoveToEnd for the
// partitions that got records, keeping the relative order of both parts.
func (s *FetchSession) moveServedToEnd(resp core.FetchResponse) {
	parts := make([]core.FetchPartition, 0, len(s.parts))
	sent := make([]sentState, 0, len(s.sent))
	for pass := range 2 {
		for i, fp := range s.parts {
			if (len(resp.Partitions[i].Records) > 0) == (pass == 1) {
				s.index[fp.TopicPartition] = len(parts)
				parts = append(parts, fp)
				sent = append(sent, s.sent[i])
			}
		}
	}
	s.parts, s.sent = parts, sent
}
