package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/replicad/replicad/controller/store"
)

// Op names a write of store.Store, for Fault.Op.
type Op string

// The writes a Fault can hit.
const (
	OpBumpControllerEpoch    Op = "BumpControllerEpoch"
	OpRegisterBroker         Op = "RegisterBroker"
	OpUpdateBroker           Op = "UpdateBroker"
	OpCreateTopic            Op = "CreateTopic"
	OpCreatePartitions       Op = "CreatePartitions"
	OpSetTopicConfig         Op = "SetTopicConfig"
	OpAlterTopicConfig       Op = "AlterTopicConfig"
	OpDeleteTopic            Op = "DeleteTopic"
	OpCompleteDeletions      Op = "CompleteDeletions"
	OpUpdatePartitions       Op = "UpdatePartitions"
	OpCreateAcls             Op = "CreateAcls"
	OpDeleteAcls             Op = "DeleteAcls"
	OpSetReplicationThrottle Op = "SetReplicationThrottle"
	OpAllocateProducerIDs    Op = "AllocateProducerIDs"
	OpBumpProducerEpoch      Op = "BumpProducerEpoch"
)

// Kind is what a Fault does to the write it hits.
type Kind int

const (
	// LandThenFail applies the write, then returns Fault.Err: the caller
	// cannot tell it landed (an etcd "request timed out" or "leader
	// changed" answer, a deadline that passed after the commit, a crash
	// between the write and its reply).
	LandThenFail Kind = iota + 1
	// FailBefore returns Fault.Err and writes nothing.
	FailBefore
	// Slow holds the write for Fault.Delay whatever the caller's context
	// says (a request already sent is not taken back), then applies it;
	// it returns the caller's context error when that ended meanwhile,
	// so the write lands after its caller gave up on it.
	Slow
)

// ErrTimedOut is a Fault's default error: it reads as etcd's answer to a
// proposal it could not confirm in time, whose outcome is unknown.
var ErrTimedOut = errors.New("storetest: injected etcdserver: request timed out")

// Call is one write as a Fault's Match sees it.
type Call struct {
	Op Op
	// Updates are UpdatePartitions' argument (and AlterTopicConfig's partitions).
	Updates []store.PartitionUpdate
	// Broker is RegisterBroker's or UpdateBroker's argument.
	Broker store.Broker
	// Topic is the topic of CreateTopic, CreatePartitions, SetTopicConfig, AlterTopicConfig and DeleteTopic.
	Topic string
}

// Fault is one injected store fault.
type Fault struct {
	// Op is the write it hits; empty: any write.
	Op   Op
	Kind Kind
	// Err is what the hit write returns (LandThenFail, FailBefore); nil:
	// ErrTimedOut.
	Err error
	// Delay is how long a Slow write is held.
	Delay time.Duration
	// Times is how many writes it hits before it is spent; 0: one, a
	// negative number: every matching write until Clear.
	Times int
	// Match, when set, picks the writes it hits among those of Op. It runs
	// under the Faulty's lock: it must not call the store.
	Match func(Call) bool
}

// Faulty is a store.Store whose writes fail as Faults say. Reads pass
// through untouched. It is safe for concurrent use; faults are matched in
// the order they were injected.
type Faulty struct {
	store.Store

	mu     sync.Mutex
	faults []*Fault
	calls  map[Op]int
	hits   map[Op]int
}

// NewFaulty wraps s; with no fault injected it behaves as s.
func NewFaulty(s store.Store) *Faulty {
	return &Faulty{Store: s, calls: map[Op]int{}, hits: map[Op]int{}}
}

// Inject adds a fault.
func (f *Faulty) Inject(flt Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if flt.Times == 0 {
		flt.Times = 1
	}
	if flt.Err == nil {
		flt.Err = ErrTimedOut
	}
	f.faults = append(f.faults, &flt)
}

// Clear removes every fault not yet spent.
func (f *Faulty) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = nil
}

// Calls is how many writes of op were made (hit or not).
func (f *Faulty) Calls(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Hits is how many writes of op a fault hit.
func (f *Faulty) Hits(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[op]
}

// take returns the fault that hits call, spending one of its times.
func (f *Faulty) take(call Call) *Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[call.Op]++
	for i, flt := range f.faults {
		if (flt.Op != "" && flt.Op != call.Op) || (flt.Match != nil && !flt.Match(call)) {
			continue
		}
		if flt.Times > 0 {
			flt.Times--
			if flt.Times == 0 {
				f.faults = append(f.faults[:i:i], f.faults[i+1:]...)
			}
		}
		f.hits[call.Op]++
		hit := *flt
		return &hit
	}
	return nil
}

// do runs write under the fault that hits call, if any.
func (f *Faulty) do(ctx context.Context, call Call, write func(context.Context) error) error {
	flt := f.take(call)
	if flt == nil {
		return write(ctx)
	}
	switch flt.Kind {
	case FailBefore:
		return fmt.Errorf("%s: %w", call.Op, flt.Err)
	case LandThenFail:
		if err := write(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		return fmt.Errorf("%s (it landed): %w", call.Op, flt.Err)
	case Slow:
		t := time.NewTimer(flt.Delay)
		<-t.C
		if err := write(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s (it landed after the caller's deadline): %w", call.Op, err)
		}
		return nil
	}
	return write(ctx)
}

func (f *Faulty) BumpControllerEpoch(ctx context.Context, past int32) (epoch int32, err error) {
	err = f.do(ctx, Call{Op: OpBumpControllerEpoch}, func(ctx context.Context) (err error) {
		epoch, err = f.Store.BumpControllerEpoch(ctx, past)
		return err
	})
	return epoch, err
}

func (f *Faulty) RegisterBroker(ctx context.Context, b store.Broker) (out store.Broker, err error) {
	err = f.do(ctx, Call{Op: OpRegisterBroker, Broker: b}, func(ctx context.Context) (err error) {
		out, err = f.Store.RegisterBroker(ctx, b)
		return err
	})
	return out, err
}

func (f *Faulty) UpdateBroker(ctx context.Context, b store.Broker) error {
	return f.do(ctx, Call{Op: OpUpdateBroker, Broker: b}, func(ctx context.Context) error { return f.Store.UpdateBroker(ctx, b) })
}

func (f *Faulty) CreateTopic(ctx context.Context, name string, parts []store.Partition, configs map[string]string) error {
	return f.do(ctx, Call{Op: OpCreateTopic, Topic: name}, func(ctx context.Context) error {
		return f.Store.CreateTopic(ctx, name, parts, configs)
	})
}

func (f *Faulty) SetTopicConfig(ctx context.Context, name string, expected int64, configs map[string]string) (out store.TopicConfig, err error) {
	err = f.do(ctx, Call{Op: OpSetTopicConfig, Topic: name}, func(ctx context.Context) (err error) {
		out, err = f.Store.SetTopicConfig(ctx, name, expected, configs)
		return err
	})
	return out, err
}

func (f *Faulty) CreatePartitions(ctx context.Context, name string, existing int32, parts []store.Partition) error {
	return f.do(ctx, Call{Op: OpCreatePartitions, Topic: name}, func(ctx context.Context) error {
		return f.Store.CreatePartitions(ctx, name, existing, parts)
	})
}

func (f *Faulty) AlterTopicConfig(ctx context.Context, name string, expected int64, next store.TopicConfig, updates []store.PartitionUpdate) error {
	return f.do(ctx, Call{Op: OpAlterTopicConfig, Topic: name, Updates: updates}, func(ctx context.Context) error {
		return f.Store.AlterTopicConfig(ctx, name, expected, next, updates)
	})
}

func (f *Faulty) DeleteTopic(ctx context.Context, name string) error {
	return f.do(ctx, Call{Op: OpDeleteTopic, Topic: name}, func(ctx context.Context) error { return f.Store.DeleteTopic(ctx, name) })
}

func (f *Faulty) CompleteDeletions(ctx context.Context, topicID string, done []store.Replica) error {
	return f.do(ctx, Call{Op: OpCompleteDeletions}, func(ctx context.Context) error {
		return f.Store.CompleteDeletions(ctx, topicID, done)
	})
}

func (f *Faulty) UpdatePartitions(ctx context.Context, updates []store.PartitionUpdate) error {
	return f.do(ctx, Call{Op: OpUpdatePartitions, Updates: updates}, func(ctx context.Context) error {
		return f.Store.UpdatePartitions(ctx, updates)
	})
}

func (f *Faulty) CreateAcls(ctx context.Context, acls []store.ACL) (out []store.ACL, err error) {
	err = f.do(ctx, Call{Op: OpCreateAcls}, func(ctx context.Context) (err error) {
		out, err = f.Store.CreateAcls(ctx, acls)
		return err
	})
	return out, err
}

func (f *Faulty) DeleteAcls(ctx context.Context, filters []store.ACLFilter) (out []store.ACL, err error) {
	err = f.do(ctx, Call{Op: OpDeleteAcls}, func(ctx context.Context) (err error) {
		out, err = f.Store.DeleteAcls(ctx, filters)
		return err
	})
	return out, err
}

func (f *Faulty) SetReplicationThrottle(ctx context.Context, bytesPerSec int64) error {
	return f.do(ctx, Call{Op: OpSetReplicationThrottle}, func(ctx context.Context) error {
		return f.Store.SetReplicationThrottle(ctx, bytesPerSec)
	})
}

func (f *Faulty) AllocateProducerIDs(ctx context.Context, count int32) (first int64, err error) {
	err = f.do(ctx, Call{Op: OpAllocateProducerIDs}, func(ctx context.Context) (err error) {
		first, err = f.Store.AllocateProducerIDs(ctx, count)
		return err
	})
	return first, err
}

func (f *Faulty) BumpProducerEpoch(ctx context.Context, id int64, from int16) (next int16, err error) {
	err = f.do(ctx, Call{Op: OpBumpProducerEpoch}, func(ctx context.Context) (err error) {
		next, err = f.Store.BumpProducerEpoch(ctx, id, from)
		return err
	})
	return next, err
}
