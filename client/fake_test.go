package client

import (
	"context"
	"fmt"
	"net"
	"sort"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// fakeCluster is an in-memory LogService on loopback brokers that checks
// sequences as a replicad leader does (its last five batches per producer
// per partition), with a hook that injects faults into produce requests.
type fakeCluster struct {
	t  *testing.T
	mu sync.Mutex
	// brokers by ID; leaders by partition (partitions of topic "t").
	addrs      map[int32]string
	servers    map[int32]*grpc.Server
	leader     map[int32]int32
	partitions int32
	logs       map[int32][]fakeRecord
	pstate     map[int32]map[int64]*fakeProducer
	nextPID    int64
	epochs     map[int64]int16 // newest epoch handed out per ID
	noInit     bool            // InitProducerId answers Unimplemented
	loseBumps  int             // this many bumps are carried out, then answered REQUEST_TIMED_OUT
	// noteStale: a refused bump says, as a broker whose own resent bump
	// found the epoch bumped does, that its earlier attempt may have landed.
	noteStale bool
	// hook decides what happens to the n-th produce request (from 1)
	// reaching broker id.
	hook     func(n int, id int32, req *replicadv1.ProduceRequest) action
	requests int
	inits    []*replicadv1.InitProducerIdRequest
	answers  map[replicadv1.ErrorCode]int // error codes answered
}

type fakeRecord struct {
	pid   int64
	epoch int16
	seq   int32
	value string
}

type fakeProducer struct {
	epoch   int16
	batches []fakeBatch // the last five
}

type fakeBatch struct {
	first, last int32
	base        int64
}

// action is what the fake does with one produce request.
type action int

const (
	normal            action = iota
	notLeader                // answer NOT_LEADER_OR_FOLLOWER, append nothing
	resetBefore              // end the stream before appending (request lost)
	resetAfter               // append, then end the stream (answer lost)
	hangAfter                // append, then never answer
	timedOutAfter            // append, answer REQUEST_TIMED_OUT
	notEnough                // NOT_ENOUGH_REPLICAS, nothing appended
	forgetProducer           // drop the producer's state, then handle normally
	storageErrorAfter        // append, answer STORAGE_ERROR (a failed fsync after the write)
)

type fakeBroker struct {
	replicadv1.UnimplementedLogServiceServer
	c  *fakeCluster
	id int32
}

func newFakeCluster(t *testing.T, brokers int, partitions int32) *fakeCluster {
	c := &fakeCluster{t: t, addrs: map[int32]string{}, servers: map[int32]*grpc.Server{}, leader: map[int32]int32{}, partitions: partitions,
		logs: map[int32][]fakeRecord{}, pstate: map[int32]map[int64]*fakeProducer{}, nextPID: 1000, epochs: map[int64]int16{}}
	for id := int32(1); id <= int32(brokers); id++ {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		replicadv1.RegisterLogServiceServer(srv, &fakeBroker{c: c, id: id})
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		c.addrs[id] = lis.Addr().String()
		c.servers[id] = srv
	}
	for p := range partitions {
		c.leader[p] = 1
	}
	return c
}

func (c *fakeCluster) bootstrap() []string {
	var out []string
	for id := int32(1); id <= int32(len(c.addrs)); id++ {
		out = append(out, c.addrs[id])
	}
	return out
}

func (c *fakeCluster) setLeader(p, id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader[p] = id
}

func (c *fakeCluster) log(p int32) []fakeRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]fakeRecord(nil), c.logs[p]...)
}

func (b *fakeBroker) Metadata(_ context.Context, req *replicadv1.MetadataRequest) (*replicadv1.MetadataResponse, error) {
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &replicadv1.MetadataResponse{BrokerId: b.id}
	ids := make([]int, 0, len(c.addrs))
	for id := range c.addrs {
		ids = append(ids, int(id))
	}
	sort.Ints(ids)
	for _, id := range ids {
		host, port, _ := net.SplitHostPort(c.addrs[int32(id)])
		var pn int
		fmt.Sscan(port, &pn)
		resp.Brokers = append(resp.Brokers, &replicadv1.Broker{Id: int32(id), Host: host, Port: int32(pn)})
	}
	for _, topic := range req.GetTopics() {
		mt := &replicadv1.MetadataTopic{Topic: topic}
		if topic != "t" {
			mt.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		} else {
			for p := range c.partitions {
				mt.Partitions = append(mt.Partitions, &replicadv1.MetadataPartition{Partition: p, Leader: c.leader[p], LeaderEpoch: 1})
			}
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

func (b *fakeBroker) InitProducerId(_ context.Context, req *replicadv1.InitProducerIdRequest) (*replicadv1.InitProducerIdResponse, error) {
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.noInit {
		return nil, status.Error(codes.Unimplemented, "unknown method InitProducerId")
	}
	c.inits = append(c.inits, req)
	if req.GetProducerId() == 0 {
		c.nextPID++
		c.epochs[c.nextPID] = 0
		return &replicadv1.InitProducerIdResponse{ProducerId: c.nextPID}, nil
	}
	e, ok := c.epochs[req.GetProducerId()]
	if !ok || int16(req.GetProducerEpoch()) != e {
		resp := &replicadv1.InitProducerIdResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH}
		if c.noteStale {
			resp.ErrorMessage = "producer 1 epoch 0 is not its newest (" + lostBumpNote + ": ask for a new producer ID)"
		}
		return resp, nil
	}
	c.epochs[req.GetProducerId()] = e + 1
	if c.loseBumps > 0 {
		c.loseBumps--
		return &replicadv1.InitProducerIdResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT}, nil
	}
	return &replicadv1.InitProducerIdResponse{ProducerId: req.GetProducerId(), ProducerEpoch: int32(e + 1)}, nil
}

func (b *fakeBroker) ProduceStream(s replicadv1.LogService_ProduceStreamServer) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		resp, act := b.produce(req)
		switch act {
		case resetBefore, resetAfter:
			return status.Error(codes.Unavailable, "connection reset (injected)")
		case hangAfter:
			<-s.Context().Done()
			return nil
		}
		if err := s.Send(resp); err != nil {
			return nil
		}
	}
}

func (b *fakeBroker) Produce(_ context.Context, req *replicadv1.ProduceRequest) (*replicadv1.ProduceResponse, error) {
	resp, act := b.produce(req)
	switch act {
	case resetBefore, resetAfter, hangAfter:
		return nil, status.Error(codes.Unavailable, "connection reset (injected)")
	}
	return resp, nil
}

// produce applies one request as a leader would.
func (b *fakeBroker) produce(req *replicadv1.ProduceRequest) (*replicadv1.ProduceResponse, action) {
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	act := normal
	if c.hook != nil {
		act = c.hook(c.requests, b.id, req)
	}
	p := req.GetPartition()
	fail := func(code replicadv1.ErrorCode) *replicadv1.ProduceResponse {
		if c.answers == nil {
			c.answers = map[replicadv1.ErrorCode]int{}
		}
		c.answers[code]++
		return &replicadv1.ProduceResponse{ErrorCode: code, BaseOffset: -1}
	}
	if c.leader[p] != b.id || act == notLeader {
		return fail(replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER), normal
	}
	switch act {
	case resetBefore:
		return nil, act
	case notEnough:
		return fail(replicadv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS), normal
	case forgetProducer:
		delete(c.pstate[p], req.GetProducerId())
	}
	n := int32(len(req.GetRecords()))
	pid, epoch, seq := req.GetProducerId(), int16(req.GetProducerEpoch()), req.GetBaseSequence()
	if pid != 0 {
		if c.pstate[p] == nil {
			c.pstate[p] = map[int64]*fakeProducer{}
		}
		st := c.pstate[p][pid]
		switch {
		case st == nil && seq != 0:
			return fail(replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID), normal
		case st != nil && epoch < st.epoch:
			return fail(replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH), normal
		case st != nil && epoch > st.epoch:
			if seq != 0 {
				return fail(replicadv1.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER), normal
			}
			st = nil
		}
		if st != nil {
			for _, fb := range st.batches {
				if fb.first == seq && fb.last == seq+n-1 {
					return &replicadv1.ProduceResponse{BaseOffset: fb.base, Duplicate: true, HighWatermark: int64(len(c.logs[p]))}, normal
				}
			}
			if last := st.batches[len(st.batches)-1].last; seq != last+1 {
				return fail(replicadv1.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER), normal
			}
		} else {
			st = &fakeProducer{epoch: epoch}
			c.pstate[p][pid] = st
		}
		st.batches = append(st.batches, fakeBatch{seq, seq + n - 1, int64(len(c.logs[p]))})
		if len(st.batches) > 5 {
			st.batches = st.batches[1:]
		}
	}
	base := int64(len(c.logs[p]))
	for i, r := range req.GetRecords() {
		c.logs[p] = append(c.logs[p], fakeRecord{pid: pid, epoch: epoch, seq: seq + int32(i), value: string(r.GetValue())})
	}
	resp := &replicadv1.ProduceResponse{BaseOffset: base, HighWatermark: int64(len(c.logs[p]))}
	if act == timedOutAfter {
		return fail(replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT), normal
	}
	if act == storageErrorAfter {
		return fail(replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR), normal
	}
	return resp, act
}

// Consume answers from the log, at most 4 records a call; the fake
// predates Consume's -1 and -2 (InvalidArgument) unless c.resolves.
func (b *fakeBroker) Consume(_ context.Context, req *replicadv1.ConsumeRequest) (*replicadv1.ConsumeResponse, error) {
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	p := req.GetPartition()
	if c.leader[p] != b.id {
		return &replicadv1.ConsumeResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER}, nil
	}
	log := c.logs[p]
	hw := int64(len(log))
	off := req.GetOffset()
	if off < 0 {
		return nil, status.Error(codes.InvalidArgument, "offset: must not be negative")
	}
	if off > hw {
		return &replicadv1.ConsumeResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE, HighWatermark: hw}, nil
	}
	end := min(off+4, hw)
	resp := &replicadv1.ConsumeResponse{HighWatermark: hw, NextOffset: end}
	for i := off; i < end; i++ {
		r := log[i]
		resp.Records = append(resp.Records, &replicadv1.ConsumedRecord{Offset: i, Value: []byte(r.value), ProducerId: r.pid,
			ProducerEpoch: int32(r.epoch), Sequence: r.seq, TimestampMs: 1000})
	}
	return resp, nil
}
