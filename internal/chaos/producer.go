package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// sender is one instance of a workload producer: it sends a record and
// retries it, as it is, until the cluster acknowledges or refuses it.
type sender interface {
	// send produces value to partition p; it returns the offset, the
	// broker that answered last and the requests made. An error wraps
	// errRefused when the cluster refused the record (the instance's
	// earlier tries may still have appended it), and is unknown otherwise
	// (the workload stopped, or done was closed, with the record in doubt).
	send(ctx context.Context, done <-chan struct{}, p int32, value string) (offset int64, broker int32, tries int, err error)
	// ids is the instance's producer ID and epoch (0, 0: plain produce).
	ids() (pid int64, epoch int32)
	close()
}

var (
	// errRefused: the cluster answered the record with an error that a
	// retry does not mend.
	errRefused = errors.New("refused")
	// errFenced: refused with INVALID_PRODUCER_EPOCH, a newer instance of
	// the producer wrote to the partition.
	errFenced = fmt.Errorf("%w: fenced", errRefused)
	// errSequence: refused with OUT_OF_ORDER_SEQUENCE_NUMBER or
	// UNKNOWN_PRODUCER_ID: the partition's producer state and the
	// instance's sequence disagree; the producer restarts (epoch bump)
	// and starts the partition's sequence again at 0.
	errSequence = fmt.Errorf("%w: sequence", errRefused)
)

// rawSender is a sender on the raw LogService stubs: one record per
// request and one request in flight per partition, an acks=all produce
// retried with the same producer ID, epoch and sequence after every
// ambiguous outcome (a transport error, a timeout, a leader change), as
// an idempotent client does. plain: no producer ID, so every retry that
// the first try already appended appends the record again.
type rawSender struct {
	w     *Workload
	plain bool
	pid   int64
	epoch int32

	mu    sync.Mutex
	seq   map[int32]int32 // the next sequence per partition
	locks map[int32]*sync.Mutex
	// broken: partitions the instance cannot write any more (fenced, or
	// its sequence refused).
	broken map[int32]error
}

func (s *rawSender) ids() (int64, int32) { return s.pid, s.epoch }

func (s *rawSender) close() {}

// partition locks p for one send and returns its next sequence.
func (s *rawSender) partition(p int32) (*sync.Mutex, int32, error) {
	s.mu.Lock()
	l := s.locks[p]
	if l == nil {
		l = &sync.Mutex{}
		s.locks[p] = l
	}
	s.mu.Unlock()
	l.Lock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return l, s.seq[p], s.broken[p]
}

func (s *rawSender) setBroken(p int32, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken == nil {
		s.broken = map[int32]error{}
	}
	s.broken[p] = err
}

func (s *rawSender) send(ctx context.Context, done <-chan struct{}, p int32, value string) (int64, int32, int, error) {
	l, seq, broken := s.partition(p)
	defer l.Unlock()
	if broken != nil {
		return 0, 0, 0, broken
	}
	w := s.w
	req := &replicadv1.ProduceRequest{Topic: Topic, Partition: p, Acks: -1, TimeoutMs: 3000,
		Records: []*replicadv1.Record{{Value: []byte(value)}}}
	if !s.plain {
		req.ProducerId, req.ProducerEpoch, req.BaseSequence = s.pid, s.epoch, seq
	}
	refresh := false
	tries := 0
	var leader int32
	var last error
	for {
		select {
		case <-ctx.Done():
			return 0, leader, tries, fmt.Errorf("unknown: the workload stopped (last: %v)", last)
		case <-done:
			return 0, leader, tries, fmt.Errorf("unknown: the instance was retired (last: %v)", last)
		default:
		}
		leader = w.leader(ctx, p, refresh)
		refresh = false
		if leader <= 0 {
			refresh = true
			w.pause(50 * time.Millisecond)
			continue
		}
		tries++
		cctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		resp, err := w.c.log(leader).Produce(cctx, req)
		cancel()
		switch code := resp.GetErrorCode(); {
		case err != nil:
			switch status.Code(err) {
			case codes.InvalidArgument, codes.PermissionDenied, codes.Unimplemented:
				return 0, leader, tries, fmt.Errorf("%w: %v", errRefused, err)
			}
			last = err
		case code == replicadv1.ErrorCode_ERROR_CODE_NONE:
			s.mu.Lock()
			s.seq[p] = seq + 1
			s.mu.Unlock()
			return resp.GetBaseOffset(), leader, tries, nil
		case code == replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH:
			err := fmt.Errorf("%w: %s", errFenced, resp.GetErrorMessage())
			s.setBroken(p, err)
			return 0, leader, tries, err
		case code == replicadv1.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER, code == replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID:
			err := fmt.Errorf("%w: %v at sequence %d: %s", errSequence, code, seq, resp.GetErrorMessage())
			s.setBroken(p, err)
			return 0, leader, tries, err
		case code == replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST:
			return 0, leader, tries, fmt.Errorf("%w: %v: %s", errRefused, code, resp.GetErrorMessage())
		default:
			// NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
			// NOT_ENOUGH_REPLICAS(_AFTER_APPEND), a fenced leader epoch, a
			// storage error: the record may or may not be in a log; the
			// same request again.
			last = fmt.Errorf("%v: %s", code, resp.GetErrorMessage())
		}
		w.h.add(Event{Kind: "produce-retry", Partition: p, Value: value, Error: last.Error(), PID: s.pid, Epoch: s.epoch,
			Detail: fmt.Sprintf("broker %d, try %d, sequence %d", leader, tries, seq)})
		refresh = true
		w.pause(20 * time.Millisecond)
	}
}
