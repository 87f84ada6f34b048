package service

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/producerid"
)

// fakeIDs is a ProducerIDs that issues 41, 42, ... and bumps by one, or
// answers err; it records each call's deadline.
type fakeIDs struct {
	mu        sync.Mutex
	next      int64
	bumps     int
	err       error
	block     bool // wait for the caller's deadline
	deadlines []time.Duration
}

func (f *fakeIDs) note(ctx context.Context) error {
	f.mu.Lock()
	if d, ok := ctx.Deadline(); ok {
		f.deadlines = append(f.deadlines, time.Until(d))
	}
	block, err := f.block, f.err
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (f *fakeIDs) NewProducerID(ctx context.Context) (int64, error) {
	if err := f.note(ctx); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	return 40 + f.next, nil
}

func (f *fakeIDs) BumpEpoch(ctx context.Context, id int64, epoch int16) (int16, error) {
	if err := f.note(ctx); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bumps++
	return epoch + 1, nil
}

func initPID(t *testing.T, c replicadv1.LogServiceClient, req *replicadv1.InitProducerIdRequest) *replicadv1.InitProducerIdResponse {
	t.Helper()
	r, err := c.InitProducerId(context.Background(), req)
	if err != nil {
		t.Fatalf("InitProducerId(%v): %v", req, err)
	}
	return r
}

// InitProducerId issues a new ID at epoch 0, bumps a given one, maps the
// manager's refusals and timeouts to error codes, refuses the largest epoch
// itself, and waits timeout_ms (default 30 s) at most.
func TestInitProducerId(t *testing.T) {
	ids := &fakeIDs{}
	_, conn := startServerWith(t, Options{ReplicaManager: &fakeRM{}, ProducerIDs: ids})
	c := replicadv1.NewLogServiceClient(conn)

	mustProtoEqual(t, "new", initPID(t, c, &replicadv1.InitProducerIdRequest{}), &replicadv1.InitProducerIdResponse{ProducerId: 41})
	mustProtoEqual(t, "new again", initPID(t, c, &replicadv1.InitProducerIdRequest{}), &replicadv1.InitProducerIdResponse{ProducerId: 42})
	mustProtoEqual(t, "bump", initPID(t, c, &replicadv1.InitProducerIdRequest{ProducerId: 41, ProducerEpoch: 6}),
		&replicadv1.InitProducerIdResponse{ProducerId: 41, ProducerEpoch: 7})

	r := initPID(t, c, &replicadv1.InitProducerIdRequest{ProducerId: 41, ProducerEpoch: 32767})
	if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST || r.GetErrorMessage() == "" || ids.bumps != 1 {
		t.Fatalf("bump from 32767: %v (bumps sent %d), want INVALID_REQUEST without asking the controller", r, ids.bumps)
	}

	ids.mu.Lock()
	ids.err = &producerid.CodeError{Code: replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH, Message: "fenced"}
	ids.mu.Unlock()
	r = initPID(t, c, &replicadv1.InitProducerIdRequest{ProducerId: 41, ProducerEpoch: 6})
	if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH || r.GetProducerId() != 0 {
		t.Fatalf("fenced bump: %v, want INVALID_PRODUCER_EPOCH", r)
	}
	ids.mu.Lock()
	ids.err, ids.block = nil, true
	ids.deadlines = nil
	ids.mu.Unlock()
	start := time.Now()
	r = initPID(t, c, &replicadv1.InitProducerIdRequest{TimeoutMs: 50})
	if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT || time.Since(start) > 10*time.Second {
		t.Fatalf("InitProducerId with the controller away: %v after %v, want REQUEST_TIMED_OUT after 50ms", r, time.Since(start))
	}
	ids.mu.Lock()
	ids.block = false
	ids.deadlines = nil
	ids.mu.Unlock()
	initPID(t, c, &replicadv1.InitProducerIdRequest{})
	if d := ids.deadlines; len(d) != 1 || d[0] < 25*time.Second || d[0] > DefaultInitProducerIdTimeout {
		t.Fatalf("deadline without timeout_ms: %v, want about %v", d, DefaultInitProducerIdTimeout)
	}

	// A broker without a controller cannot issue IDs.
	_, conn = startServerWith(t, Options{ReplicaManager: &fakeRM{}})
	r = initPID(t, replicadv1.NewLogServiceClient(conn), &replicadv1.InitProducerIdRequest{})
	if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE || r.GetErrorMessage() == "" {
		t.Fatalf("InitProducerId on a broker without a controller: %v, want BROKER_NOT_AVAILABLE", r)
	}
}

// An idempotent produce reaches core with its producer, in a v1 batch that
// carries it, on Produce and ProduceStream alike; the answer's duplicate
// flag is core's; a plain produce stays a v0 batch with NoProducer.
func TestIdempotentProduceTranslate(t *testing.T) {
	rm := &fakeRM{produce: core.ProduceResult{BaseOffset: 17, HighWatermark: 20, Duplicate: true}}
	_, conn := startServer(t, rm)
	c := replicadv1.NewLogServiceClient(conn)
	req := &replicadv1.ProduceRequest{Topic: "t", Partition: 0, Acks: -1, ProducerId: 9, ProducerEpoch: 3, BaseSequence: 100,
		Records: []*replicadv1.Record{{Value: []byte("a")}, {Value: []byte("b")}}}
	resp, err := c.Produce(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "produce answer", resp, &replicadv1.ProduceResponse{BaseOffset: 17, HighWatermark: 20, Duplicate: true})
	stream, err := c.ProduceStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	sresp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !sresp.GetDuplicate() || sresp.GetBaseOffset() != 17 {
		t.Fatalf("stream answer %v, want duplicate at 17", sresp)
	}
	_ = stream.CloseSend()
	plain := &replicadv1.ProduceRequest{Topic: "t", Partition: 0, Acks: 1, Records: []*replicadv1.Record{{Value: []byte("c")}}}
	if _, err := c.Produce(context.Background(), plain); err != nil {
		t.Fatal(err)
	}

	calls := rm.Calls()
	if len(calls) != 3 {
		t.Fatalf("%d calls reached core, want 3", len(calls))
	}
	want := record.Producer{ID: 9, Epoch: 3, BaseSequence: 100}
	for i, call := range calls[:2] {
		pr := call.(core.ProduceRequest)
		if pr.Producer != want || !pr.Batch.HasProducer() || pr.Batch.Producer() != want {
			t.Fatalf("call %d: producer %+v, batch v1 %v with %+v; want %+v in both", i, pr.Producer, pr.Batch.HasProducer(), pr.Batch.Producer(), want)
		}
		recs, err := pr.Batch.Records()
		if err != nil || len(recs) != 2 || recs[1].Sequence != 101 {
			t.Fatalf("call %d: records %+v %v, want sequences 100, 101", i, recs, err)
		}
	}
	if pr := calls[2].(core.ProduceRequest); pr.Producer != record.NoProducer || pr.Batch.HasProducer() {
		t.Fatalf("plain produce: producer %+v, v1 batch %v; want NoProducer in a v0 batch", pr.Producer, pr.Batch.HasProducer())
	}
}

// Consume passes -1 and -2 to core (which resolves them) and returns each
// record's producer fields: an idempotent batch's, or 0, 0, -1.
func TestConsumeLogicalOffsetsAndProducerFields(t *testing.T) {
	rm := &fakeRM{consume: core.ConsumeResult{HighWatermark: 3, NextOffset: 3, Records: []record.Record{
		{Offset: 1, Value: []byte("a"), ProducerID: 9, ProducerEpoch: 2, Sequence: 5},
		{Offset: 2, Value: []byte("b")},
	}}}
	_, conn := startServer(t, rm)
	c := replicadv1.NewLogServiceClient(conn)
	for _, off := range []int64{-1, -2} {
		resp, err := c.Consume(context.Background(), &replicadv1.ConsumeRequest{Topic: "t", Offset: off})
		if err != nil {
			t.Fatalf("consume at %d: %v", off, err)
		}
		mustProtoEqual(t, "records", resp, &replicadv1.ConsumeResponse{HighWatermark: 3, NextOffset: 3, Records: []*replicadv1.ConsumedRecord{
			{Offset: 1, Value: []byte("a"), ProducerId: 9, ProducerEpoch: 2, Sequence: 5},
			{Offset: 2, Value: []byte("b"), Sequence: -1},
		}})
	}
	calls := rm.Calls()
	if calls[0].(core.ConsumeRequest).Offset != -1 || calls[1].(core.ConsumeRequest).Offset != -2 {
		t.Fatalf("core got %v, want offsets -1 then -2", calls)
	}
}
