package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The workload's producers are the public client's (client.Producer): the
// library an application uses is the one the faults test. Its settings
// keep a stalled attempt short, as the raw workload's 4 s calls were, so
// the availability bound measures the cluster, not the client's patience:
// the leader waits 3 s for the ISR, and a batch unanswered for 3 s plus
// 1 s is retried (with the same sequence) on the leader a fresh lookup
// names.
const (
	ackTimeout     = 3 * time.Second
	requestTimeout = time.Second
	// deliveryTimeout bounds a record's retries: past the longest fault
	// (a long cut of 40 s, a harsh round's two brokers down), so a record
	// fails only when something is wrong, and so Stop (which closes the
	// producers, flushing) ends.
	deliveryTimeout = 90 * time.Second
	// window is the records a producer has unanswered per partition: the
	// client keeps them in flight as batches of their own, so its retries
	// keep the order of several batches in flight. Two keep the record
	// rate near the raw workload's times three (a few thousand a second).
	window = 2
	// failPause is how long a lane waits after a failed record before it
	// sends a new one, as the raw workload did: a refused partition (NOT_
	// ENOUGH_REPLICAS, a fenced instance) fails records as fast as they
	// come.
	failPause = 20 * time.Millisecond
)

// newInstance starts an incarnation of producer pr: its own client (as a
// restarted process has) and client.Producer, initialized with a new
// producer ID, or, when old is set, with old's ID and its epoch bumped, so
// the cluster fences old. Retried until the workload stops.
func (w *Workload) newInstance(pr *wproducer, old *instance) (*instance, error) {
	inst := &instance{done: make(chan struct{})}
	if old != nil {
		inst.inc = old.inc + 1
	}
	var resumeID int64
	var resumeEpoch int16
	if old != nil {
		resumeID, resumeEpoch = old.p.ProducerID()
	}
	var addrs []string
	for _, b := range w.c.brokers {
		addrs = append(addrs, b.proxy)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(w.c.creds)}
	cl, err := client.New(client.Config{Bootstrap: addrs, DialOptions: opts, RequestTimeout: requestTimeout,
		RetryBackoff: 20 * time.Millisecond, RetryBackoffMax: 250 * time.Millisecond, MetadataMaxAge: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	p, err := client.NewProducer(cl, client.ProducerConfig{DisableIdempotence: !w.idempotent, AckTimeout: ackTimeout,
		ResumeID: resumeID, ResumeEpoch: resumeEpoch,
		DeliveryTimeout: deliveryTimeout, MaxInFlight: 5,
		OnBatch: func(b client.BatchResult) {
			if b.Attempts > 1 || b.Duplicate {
				w.mu.Lock()
				w.retries += b.Attempts - 1
				w.mu.Unlock()
				w.h.add(Event{Kind: "batch-retried", Partition: b.Partition, Offset: b.BaseOffset,
					Detail: fmt.Sprintf("w%d.i%d: %d records, %d attempts, duplicate %v, err %v", pr.k, inst.inc, b.Records, b.Attempts, b.Duplicate, b.Err)})
			}
		}})
	if err != nil {
		_ = cl.Close()
		return nil, err
	}
	inst.cl, inst.p = cl, p
	for w.idempotent {
		ctx, cancel := context.WithTimeout(w.ctx, client.InitProducerIDTimeout+5*time.Second)
		err := p.Init(ctx)
		cancel()
		if err == nil {
			break
		}
		var cerr *client.Error
		if w.stopped() || errors.Is(err, client.ErrIdempotenceUnsupported) ||
			(old != nil && errors.As(err, &cerr) && cerr.Code == replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH) {
			// A bump refused: an earlier try of it was carried out and
			// its answer lost, or the old instance bumped its epoch
			// itself meanwhile. The restart is given up; old goes on.
			inst.close()
			return nil, err
		}
		w.h.add(Event{Kind: "producer-init-fail", Error: err.Error(), Detail: fmt.Sprintf("w%d.i%d", pr.k, inst.inc)})
		w.pause(200 * time.Millisecond)
	}
	pid, epoch := p.ProducerID()
	kind := "producer-init"
	if old != nil {
		kind = "producer-restart"
	}
	w.h.add(Event{Kind: kind, PID: pid, Epoch: int32(epoch), Detail: fmt.Sprintf("w%d.i%d", pr.k, inst.inc)})
	return inst, nil
}

// close flushes the instance's producer (up to deliveryTimeout) and closes
// it and its client.
func (inst *instance) close() {
	_ = inst.p.Close()
	_ = inst.cl.Close()
}

// lane is a producer instance's records to one partition: at most window
// unanswered; in plain mode, records whose outcome was an error come back
// to be sent again as they are.
type lane struct {
	slots chan struct{}
	again chan string
	// failed is signalled when a record failed: the lane pauses.
	failed chan struct{}
}

func newLane() *lane {
	return &lane{slots: make(chan struct{}, window), again: make(chan string, window), failed: make(chan struct{}, 1)}
}

// run sends pr's records to p with inst until until is closed or the
// workload stops: a new record whenever a slot is free, and in plain mode
// a failed one again first. current, when set, picks the instance for
// each new record (the producer's current one: a restart moves the lane
// over); records resent go with the instance that sent them first.
func (w *Workload) runLane(pr *wproducer, p int32, fixed *instance, until <-chan struct{}) {
	l := newLane()
	for {
		select {
		case <-l.failed:
			w.pause(failPause)
			continue
		default:
		}
		select {
		case <-w.stop:
			return
		case <-until:
			return
		case v := <-l.again:
			w.sendRecord(pr, fixed, l, p, v, true)
		case l.slots <- struct{}{}:
			inst := fixed
			if inst == nil {
				pr.mu.Lock()
				inst = pr.cur
				pr.mu.Unlock()
			}
			pr.mu.Lock()
			id := recordID{Producer: pr.k, Incarnation: inst.inc, Index: pr.next}
			pr.next++
			pr.mu.Unlock()
			w.sendRecord(pr, inst, l, p, id.String(), false)
		}
	}
}

// sendRecord hands value to inst's producer; its callback records the
// outcome and frees the lane's slot, or, in plain mode after an error,
// queues the value to be sent again (a client that retries what it does
// not know was written).
func (w *Workload) sendRecord(pr *wproducer, inst *instance, l *lane, p int32, value string, again bool) {
	if inst == nil {
		// A record resent in plain mode: plain instances are never
		// restarted, so the current one sent it.
		pr.mu.Lock()
		inst = pr.cur
		pr.mu.Unlock()
	}
	w.mu.Lock()
	if again {
		w.resent++
	} else {
		w.attempt++
	}
	w.mu.Unlock()
	sent := time.Now()
	rec := &client.Record{Topic: Topic, Partition: p, ManualPartition: true, Value: []byte(value)}
	inst.p.Produce(w.ctx, rec, func(r *client.Record, err error) {
		now := time.Now()
		pid, epoch := r.ProducerID, int32(r.ProducerEpoch)
		if err == nil {
			w.mu.Lock()
			w.acks = append(w.acks, ack{partition: p, offset: r.Offset, value: value, at: now})
			w.mu.Unlock()
			w.h.add(Event{T: w.h.since(now), Kind: "produce-ok", Partition: p, Offset: r.Offset, Value: value, PID: pid, Epoch: epoch,
				Detail: fmt.Sprintf("sequence %d, %v after the send", r.Sequence, now.Sub(sent).Round(time.Millisecond))})
			<-l.slots
			return
		}
		fenced := errors.Is(err, client.ErrProducerFenced)
		if !w.idempotent && !fenced && !errors.Is(err, client.ErrClosed) && !w.stopped() {
			w.h.add(Event{T: w.h.since(now), Kind: "produce-again", Partition: p, Value: value, Error: err.Error()})
			l.again <- value // never blocks: the value holds a slot
			return
		}
		w.mu.Lock()
		w.failed++
		if fenced {
			w.fenced++
		}
		w.mu.Unlock()
		w.h.add(Event{T: w.h.since(now), Kind: "produce-fail", Partition: p, Value: value, Error: err.Error(), PID: pid, Epoch: epoch})
		select {
		case l.failed <- struct{}{}:
		default:
		}
		<-l.slots
	})
}
