package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs/crashfs"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/producerid"
	"github.com/replicad/replicad/protoconv"
	"github.com/replicad/replicad/server"
	"github.com/replicad/replicad/service"
)

const (
	brokerPort     = 9092
	controllerAddr = "ctl:9090"
	logDir         = "/data"
)

// brokerNode is one simulated broker machine: its disk survives its lives,
// everything else is made anew at each start (server.Broker, the broker
// cmd/replicad ships, with the network, the disk, the tracer and the
// sources of jitter replaced).
type brokerNode struct {
	sim  *Sim
	id   int32
	name string
	// fs is the disk as the current (or next) life sees it; a crash
	// replaces it with what the power cut left.
	fs    *crashfs.FS
	boots int // power cycles, for the BootID
	lives int
	// minISR is the --min-insync-replicas the next life starts with (the
	// operator may restart a broker with another).
	minISR int32
	cur    *brokerLife // nil while down
	// stopped is closed when the last life's components have stopped; a
	// restart waits for it so two lives never run on one disk.
	stopped chan struct{}
}

// brokerLife is one run of the broker process.
type brokerLife struct {
	life int
	// fileEvictions and fileReopens are the Sim's totals of the file
	// cache's work, added to when the life stops.
	fileEvictions, fileReopens *atomic.Int64
	broker                     *server.Broker
	rm                         *core.ReplicaManager
}

func (l *brokerLife) brokerEpoch() int64 { return l.broker.BrokerEpoch() }

func (b *brokerNode) up() bool { return b.cur != nil }

// canStart: down, and the previous life has stopped.
func (b *brokerNode) canStart() bool {
	if b.cur != nil {
		return false
	}
	if b.stopped == nil {
		return true
	}
	select {
	case <-b.stopped:
		return true
	default:
		return false
	}
}

// start boots a new life from the disk. It runs on the scheduler's
// goroutine; the registration goes on in the background.
func (b *brokerNode) start() error {
	s := b.sim
	b.lives++
	l := &brokerLife{life: b.lives, fileEvictions: &b.sim.fileEvictions, fileReopens: &b.sim.fileReopens}
	logger := s.logger.With().Str("node", b.name).Int("life", l.life).Logger()
	ctx, stop := context.WithCancel(context.Background())
	var gate *isrGate
	var retentionCheckInterval time.Duration
	if s.retentionOn() {
		retentionCheckInterval = simRetentionCheckInterval
	}
	broker, err := server.NewBroker(server.BrokerConfig{
		BrokerID:          b.id,
		LogDirs:           []string{logDir},
		Controllers:       []string{controllerAddr},
		AdvertisedAddress: net.JoinHostPort(b.name, strconv.Itoa(brokerPort)),
		// A file cache of a few descriptors for every partition's files:
		// segments are closed and reopened under the workload and its faults.
		LogConfig: log.Config{SegmentBytes: 4096, IndexIntervalBytes: 512, MaxBatchBytes: 1 << 20, FlushPolicy: log.FlushEveryBatch, FlushInterval: time.Second,
			MaxOpenFiles: simMaxOpenFiles},
		HWCheckpointInterval: time.Second,
		// Periodic retention every few seconds with retention in the
		// workload; the default (5 minutes) never runs within a run otherwise.
		RetentionCheckInterval: retentionCheckInterval,
		ReplicaLagTimeMax:      s.cfg.ReplicaLagTimeMax,
		MinInsyncReplicas:      int(b.minISR),
		MaxPartitions:          s.maxPartitions(),
		Logger:                 logger,
		Clock:                  clock.Real{},
		FS:                     b.fs,
		// Every crash is a power cut: a new boot, so the broker's last life
		// counts as one that may have lost its unflushed tail.
		BootID:         func() string { return fmt.Sprintf("boot-%d", b.boots) },
		TracerProvider: noop.NewTracerProvider(),
		Network: server.Network{
			Serve: func(svcs server.Services) (net.Addr, error) {
				b.serve(ctx, stop, l, svcs)
				return simAddr(net.JoinHostPort(b.name, strconv.Itoa(brokerPort))), nil
			},
			DialController: func(purpose, addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
				c := &conn{net: s.net, client: b.name, clientLife: l.life, server: nodeOf(addr), kind: purpose}
				if purpose == "producerids" {
					return newProducerIDsClient(c), nopCloser{}, nil
				}
				return controllerClient{c}, nopCloser{}, nil
			},
			LeaderClient: leaderClient{net: s.net, node: b.name, life: l.life},
		},
		Random: server.Random{
			Float64:        s.float64,
			Int64N:         s.int64N,
			AlterPartition: rand.New(rand.NewPCG(s.seed, uint64(b.id)<<32|uint64(l.life))),
		},
		IncarnationID: fmt.Sprintf("%s-life%d", b.name, l.life),
		// ISR changes are held and sent in an order the scheduler picks
		// (flushIsr).
		WrapIsrChanger: func(ap core.IsrChanger) core.IsrChanger {
			gate = &isrGate{ap: ap}
			return gate
		},
	})
	if err != nil {
		stop()
		return fmt.Errorf("start %s: %w", b.name, err)
	}
	l.broker, l.rm = broker, broker.ReplicaManager()
	s.isrGates = append(s.isrGates, gate)
	if err := broker.Start(ctx); err != nil {
		stop()
		return fmt.Errorf("start %s: %w", b.name, err)
	}
	b.cur = l
	b.stopped = make(chan struct{})
	return nil
}

// simAddr is a simulated node's address ("b1:9092").
type simAddr string

func (a simAddr) Network() string { return "sim" }
func (a simAddr) String() string  { return string(a) }

// serve puts a life's services on the simulated network: the controller's
// requests go to the service's handlers as the gRPC server's do; Produce,
// DeleteRecords, InitProducerId and Fetch to the sim's own (below), which
// skip the proto batch encoding and record what the leader acknowledged.
func (b *brokerNode) serve(ctx context.Context, stop context.CancelFunc, l *brokerLife, svcs server.Services) {
	rm, svc := svcs.ReplicaManager, svcs.ReplicaManagerService
	ep := &endpoint{name: b.name, life: l.life, ctx: ctx, stop: stop,
		unary: map[string]unaryHandler{
			"LeaderAndIsr":   unary(svc.LeaderAndIsr),
			"UpdateMetadata": unary(svc.UpdateMetadata),
			"StopReplica":    unary(svc.StopReplica),
			"Produce":        unary(b.produceHandler(rm)),
			"DeleteRecords":  unary(deleteRecordsHandler(rm)),
			"RunRetention":   unary(svc.RunRetention),
			"InitProducerId": unary(initProducerIDHandler(svcs.ProducerIDs, ctx)),
		},
		fetch: func() fetchServe {
			// The stream's fetch session, as service's Fetch keeps it.
			var session *service.FetchSession
			return func(ctx context.Context, req any) (any, error) {
				r := req.(*replicadv1.FetchRequest)
				if !r.GetSession() {
					session = nil
					return protoconv.FetchResponseToProto(r.GetCorrelationId(), rm.FetchMessages(ctx, protoconv.FetchRequestFromProto(r))), nil
				}
				if session == nil {
					session = service.NewFetchSession()
				}
				freq, err := session.Apply(r)
				if err != nil {
					return nil, err
				}
				return session.Answer(r.GetCorrelationId(), rm.FetchMessages(ctx, freq)), nil
			}
		},
	}
	b.sim.net.serve(ep)
}

// produceHandler is the leader's core produce path (service's Produce
// without the proto batch encoding): an acks=all produce, carrying the
// idempotent producer's fields when it has a producer ID. An answer NONE
// is an acknowledged write, recorded at once: the leader has promised it,
// whether or not the client hears. A duplicate answer (a retry of a batch
// the log holds) acknowledges the original append, at its offsets.
func (b *brokerNode) produceHandler(rm *core.ReplicaManager) func(context.Context, *replicadv1.ProduceRequest) (*replicadv1.ProduceResponse, error) {
	return func(ctx context.Context, req *replicadv1.ProduceRequest) (*replicadv1.ProduceResponse, error) {
		t := tp.TopicPartition{Topic: req.GetTopic(), Partition: req.GetPartition()}
		var recs []record.Record
		for _, r := range req.GetRecords() {
			recs = append(recs, record.Record{Value: r.GetValue()})
		}
		producer := record.NoProducer
		if req.GetProducerId() != 0 {
			producer = record.Producer{ID: req.GetProducerId(), Epoch: int16(req.GetProducerEpoch()), BaseSequence: req.GetBaseSequence()}
		}
		res := rm.Produce(ctx, core.ProduceRequest{TopicPartition: t, Acks: core.AcksAll,
			Timeout: time.Duration(req.GetTimeoutMs()) * time.Millisecond, Records: recs, Producer: producer})
		if res.Error == core.ErrNone {
			// The incarnation the leader acknowledged in: its replica's
			// topic ID, as it stands right after (a deletion takes a
			// StopReplica, which cannot arrive within this step).
			id := ""
			part := t.Partition
			if d := rm.Describe(t.Topic, &part); len(d.Partitions) == 1 {
				id = d.Partitions[0].TopicID
			}
			for i, r := range recs {
				b.sim.workload.acked(incarnation{t, id}, res.BaseOffset+int64(i), string(r.Value), b.id)
			}
		}
		return &replicadv1.ProduceResponse{ErrorCode: replicadv1.ErrorCode(res.Error), BaseOffset: res.BaseOffset,
			HighWatermark: res.HighWatermark, Duplicate: res.Duplicate}, nil
	}
}

// deleteRecordsHandler is the leader's DeleteRecords (service's, without
// its validation): the operator's truncation of a partition's head.
func deleteRecordsHandler(rm *core.ReplicaManager) func(context.Context, *replicadv1.DeleteRecordsRequest) (*replicadv1.DeleteRecordsResponse, error) {
	return func(ctx context.Context, req *replicadv1.DeleteRecordsRequest) (*replicadv1.DeleteRecordsResponse, error) {
		creq := core.DeleteRecordsRequest{Timeout: time.Duration(req.GetTimeoutMs()) * time.Millisecond}
		for _, p := range req.GetPartitions() {
			creq.Partitions = append(creq.Partitions, core.DeleteRecordsPartition{
				TopicPartition: tp.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}, Offset: p.GetOffset()})
		}
		res := rm.DeleteRecords(ctx, creq)
		out := &replicadv1.DeleteRecordsResponse{}
		for _, r := range res.Partitions {
			out.Partitions = append(out.Partitions, &replicadv1.DeleteRecordsPartitionResult{Topic: r.TopicPartition.Topic,
				Partition: r.TopicPartition.Partition, LowWatermark: r.LowWatermark, ErrorCode: replicadv1.ErrorCode(r.Error)})
		}
		return out, nil
	}
}

// initProducerIDHandler is the broker's InitProducerId (service's, without
// its validation): a new ID from the broker's block (producer_id 0), or the
// epoch after the given one, from the controller.
//
// The sim serves one at a time per broker, in the order they arrived (a
// channel's waiters are served in order), each until it is done or the
// broker's life ends, whatever the caller's deadline: the manager wakes
// every caller waiting for a block at once, and which took which ID would
// be the goroutines' order; and a deadline that falls in the instant
// another call ends would decide by goroutine order whether the next one
// is served. The client times out on its side and retries.
func initProducerIDHandler(m service.ProducerIDs, life context.Context) func(context.Context, *replicadv1.InitProducerIdRequest) (*replicadv1.InitProducerIdResponse, error) {
	one := make(chan struct{}, 1)
	return func(_ context.Context, req *replicadv1.InitProducerIdRequest) (*replicadv1.InitProducerIdResponse, error) {
		ctx := life
		select {
		case one <- struct{}{}:
			defer func() { <-one }()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		id, epoch := req.GetProducerId(), int16(req.GetProducerEpoch())
		var err error
		if id == 0 {
			id, err = m.NewProducerID(ctx)
		} else {
			epoch, err = m.BumpEpoch(ctx, id, epoch)
		}
		var ce *producerid.CodeError
		switch {
		case err == nil:
			return &replicadv1.InitProducerIdResponse{ProducerId: id, ProducerEpoch: int32(epoch)}, nil
		case errors.As(err, &ce):
			return &replicadv1.InitProducerIdResponse{ErrorCode: ce.Code, ErrorMessage: err.Error()}, nil
		case errors.Is(err, context.DeadlineExceeded):
			return &replicadv1.InitProducerIdResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT, ErrorMessage: err.Error()}, nil
		default:
			return &replicadv1.InitProducerIdResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE, ErrorMessage: err.Error()}, nil
		}
	}
}

// crash cuts the power: the disk keeps what was fsynced (and, page by page,
// maybe more), the node drops off the network, and the life's components
// are stopped in the background (on a dead disk and a dead network they can
// change nothing any more).
func (b *brokerNode) crash(rng *rand.Rand) {
	l := b.cur
	if l == nil {
		return
	}
	b.cur = nil
	b.fs = b.fs.CutPower(rng)
	b.boots++
	b.sim.net.down(b.name)
	stopped := b.stopped
	go func() {
		defer close(stopped)
		l.stop()
	}()
}

// stop stops a life's components, as the broker does when it must exit
// (server.Broker's Close: no controlled shutdown).
func (l *brokerLife) stop() {
	_ = l.broker.Close()
	st := l.rm.FileCacheStats()
	l.fileEvictions.Add(st.Evictions)
	l.fileReopens.Add(st.Reopens)
}

// shutdown stops the broker cleanly at the end of a run.
func (b *brokerNode) shutdown() {
	l := b.cur
	if l == nil {
		return
	}
	b.cur = nil
	b.sim.net.down(b.name)
	stopped := b.stopped
	go func() {
		defer close(stopped)
		l.stop()
	}()
}

// simMaxOpenFiles is every broker's --max-open-files: far fewer than the
// segment and index files of its partitions, so that the file cache closes
// and reopens them under the workload, its faults and the power cuts.
const simMaxOpenFiles = 2
