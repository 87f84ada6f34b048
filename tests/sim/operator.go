package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicad/replicad/core/topicconfig"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// operator is the cluster's operator: one admin command at a time, chosen
// by the scheduler among those that make sense now and interleaved with the
// faults, sent to the controller's own gRPC methods over the simulated
// network (the "cli>ctl/admin" pipes), as ctlclient sends them. Its
// commands are what issue 19's control-plane bugs need: min.insync.replicas
// up, down and deleted (on the topic, and through brokers restarted with
// another --min-insync-replicas), reassignments (replication factor
// changes included) and their cancellation, preferred and chosen
// elections, controlled shutdowns, the topic deleted and created again, the
// replication throttle set and removed.
type operator struct {
	busy atomic.Bool
	conn *conn
	wg   sync.WaitGroup

	mu       sync.Mutex
	outcomes map[string]int
	// shutdowns are the broker lives whose controlled shutdown returned:
	// the scheduler stops them (cleanly) at its next step.
	shutdowns []shutdownReq
	// broken are answers no command may get (an over-budget create
	// accepted), for the checker.
	broken []string
	// brokerConns are its connections to the brokers (DeleteRecords,
	// RunRetention).
	brokerConns map[int32]*conn
	// retention are the log starts RunRetention raised (checkRetention).
	retention []retentionDeletion
}

// overBudgetTopic is the topic the operator tries to create with more
// partitions than the brokers' --max-partitions allow: it must never exist.
const overBudgetTopic = "over-budget"

// maxPartitions is every simulated broker's --max-partitions: the topic's
// partitions and one spare (a broker hosts at most one replica of each);
// with the idempotent workload, the room the operator may grow the topic
// by (growthRoom) instead of the spare.
func (s *Sim) maxPartitions() int {
	if s.cfg.Plain {
		return s.cfg.Partitions + 1
	}
	return s.cfg.Partitions + growthRoom
}

type shutdownReq struct {
	b      *brokerNode
	life   *brokerLife
	minISR int32 // the --min-insync-replicas of its next life
}

func newOperator(n *network) *operator {
	return &operator{conn: &conn{net: n, client: clientName, clientLife: 1, server: controllerName, kind: "admin"},
		outcomes: map[string]int{}}
}

func (o *operator) note(what string, code replicadv1.ErrorCode, err error) {
	out := code.String()
	if err != nil {
		out = "transport"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.outcomes[what+":"+out]++
}

// opTimeout is an admin command's deadline (ctlclient's default).
const opTimeout = 10 * time.Second

// operate starts one operator command, chosen with the scheduler's rng.
// At most one runs at a time: a step that finds one running sleeps.
func (s *Sim) operate() {
	if s.op.busy.Load() {
		s.sleep()
		return
	}
	type option struct {
		weight int
		do     func() (string, func(ctx context.Context))
	}
	part := func() int32 { return int32(s.rng.IntN(s.cfg.Partitions)) }
	var opts []option
	opts = append(opts, option{4, func() (string, func(context.Context)) {
		k := s.rng.IntN(4) // 0: delete the override
		req := &replicadv1.AlterTopicConfigRequest{Topic: topic}
		what := "delete min.insync.replicas"
		if k > 0 {
			req.Set = map[string]string{topicconfig.MinInsyncReplicas: fmt.Sprint(k)}
			what = fmt.Sprintf("min.insync.replicas=%d", k)
		} else {
			req.Delete = []string{topicconfig.MinInsyncReplicas}
		}
		return "alter-config " + what, func(ctx context.Context) {
			resp, err := invoke[*replicadv1.AlterTopicConfigResponse](ctx, s.op.conn, "AlterTopicConfig", req)
			s.op.note("alter-config", resp.GetErrorCode(), err)
		}
	}})
	opts = append(opts, option{3, func() (string, func(context.Context)) {
		p := part()
		ids := []int32{1, 2, 3}
		s.rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		target := ids[:2+s.rng.IntN(2)] // RF 2 or 3: a reassignment may change it
		return fmt.Sprintf("reassign %d to %v", p, target), func(ctx context.Context) {
			resp, err := invoke[*replicadv1.ReassignPartitionResponse](ctx, s.op.conn, "ReassignPartition",
				&replicadv1.ReassignPartitionRequest{Topic: topic, Partition: p, Replicas: slices.Clone(target)})
			s.op.note("reassign", resp.GetErrorCode(), err)
		}
	}})
	opts = append(opts, option{2, func() (string, func(context.Context)) {
		p := part()
		return fmt.Sprintf("cancel reassignment %d", p), func(ctx context.Context) {
			resp, err := invoke[*replicadv1.ReassignPartitionResponse](ctx, s.op.conn, "ReassignPartition",
				&replicadv1.ReassignPartitionRequest{Topic: topic, Partition: p, Cancel: true})
			s.op.note("cancel", resp.GetErrorCode(), err)
		}
	}})
	opts = append(opts, option{1, func() (string, func(context.Context)) {
		return "elect preferred", func(ctx context.Context) {
			resp, err := invoke[*replicadv1.ElectLeadersResponse](ctx, s.op.conn, "ElectLeaders",
				&replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED,
					Topics: []*replicadv1.ElectLeadersTopic{{Topic: topic}}})
			s.op.note("elect-preferred", resp.GetErrorCode(), err)
		}
	}})
	opts = append(opts, option{2, func() (string, func(context.Context)) {
		p, leader := part(), int32(1+s.rng.IntN(len(s.brokers)))
		return fmt.Sprintf("elect %d leader %d", p, leader), func(ctx context.Context) {
			resp, err := invoke[*replicadv1.ElectLeaderResponse](ctx, s.op.conn, "ElectLeader",
				&replicadv1.ElectLeaderRequest{Topic: topic, Partition: p, Leader: &leader})
			s.op.note("elect", resp.GetErrorCode(), err)
		}
	}})
	opts = append(opts, option{1, func() (string, func(context.Context)) {
		return "delete and re-create topic", func(ctx context.Context) {
			resp, err := invoke[*replicadv1.DeleteTopicResponse](ctx, s.op.conn, "DeleteTopic", &replicadv1.DeleteTopicRequest{Topic: topic})
			s.op.note("delete", resp.GetErrorCode(), err)
			s.recreate(ctx)
		}
	}})
	opts = append(opts, option{1, func() (string, func(context.Context)) {
		// RF 1 and 3 per broker past the budget: refused whatever brokers
		// are live (WILL_EXCEED_PARTITION_LIMITS, or with none
		// INVALID_REPLICATION_FACTOR); checkStore holds that it never
		// reaches the store.
		n := 3*s.maxPartitions() + 3
		return fmt.Sprintf("create over-budget topic (%d partitions)", n), func(ctx context.Context) {
			resp, err := invoke[*replicadv1.CreateTopicResponse](ctx, s.op.conn, "CreateTopic",
				&replicadv1.CreateTopicRequest{Topic: overBudgetTopic, Partitions: int32(n), ReplicationFactor: 1})
			s.op.note("create-over-budget", resp.GetErrorCode(), err)
			if err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE {
				s.op.mu.Lock()
				s.op.broken = append(s.op.broken, fmt.Sprintf("a create of %d partitions over every broker's budget of %d was accepted", n, s.maxPartitions()))
				s.op.mu.Unlock()
			}
		}
	}})
	opts = append(opts, option{1, func() (string, func(context.Context)) {
		rate := []int64{0, 4096, 1 << 20}[s.rng.IntN(3)]
		return fmt.Sprintf("throttle %d B/s", rate), func(ctx context.Context) {
			resp, err := invoke[*replicadv1.AlterReplicationThrottleResponse](ctx, s.op.conn, "AlterReplicationThrottle",
				&replicadv1.AlterReplicationThrottleRequest{BytesPerSec: rate})
			s.op.note("throttle", resp.GetErrorCode(), err)
		}
	}})
	if !s.cfg.Plain {
		opts = append(opts, option{2, s.deleteRecordsOp})
		opts = append(opts, option{2, s.createPartitionsOp})
	}
	if s.retentionOn() {
		opts = append(opts, option{4, s.runRetentionOp}, option{1, s.retentionConfigOp})
	}
	var up []*brokerNode
	for _, b := range s.brokers {
		if b.up() && b.cur.broker.Registered() {
			up = append(up, b)
		}
	}
	if len(up) > 1 {
		opts = append(opts, option{2, func() (string, func(context.Context)) {
			b := up[s.rng.IntN(len(up))]
			l := b.cur
			next := b.minISR
			if s.rng.IntN(2) == 0 {
				next = int32(1 + s.rng.IntN(replicationFactor))
			}
			return fmt.Sprintf("controlled shutdown %s (restarts with --min-insync-replicas=%d)", b.name, next), func(ctx context.Context) {
				err := l.broker.ControlledShutdown(ctx)
				code := replicadv1.ErrorCode_ERROR_CODE_NONE
				if err != nil {
					code = replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT
				}
				s.op.note("controlled-shutdown", code, nil)
				// Stopped whether or not the controller moved everything,
				// as replicad stops after --controlled-shutdown-timeout.
				s.op.mu.Lock()
				s.op.shutdowns = append(s.op.shutdowns, shutdownReq{b: b, life: l, minISR: next})
				s.op.mu.Unlock()
			}
		}})
	}
	total := 0
	for _, o := range opts {
		total += o.weight
	}
	pick := s.rng.IntN(total)
	for _, o := range opts {
		if pick < o.weight {
			what, run := o.do()
			s.noteFault("op " + what)
			s.startOp(run)
			return
		}
		pick -= o.weight
	}
}

// deleteRecordsOp deletes the head of a partition (ctlclient
// delete-records), sent to the leader the store names: up to its HW, or to
// half of it. The idempotent producers' state may go with the records
// (UNKNOWN_PRODUCER_ID), and a retry may cross the truncation.
func (s *Sim) deleteRecordsOp() (string, func(context.Context)) {
	p := int32(s.rng.IntN(s.cfg.Partitions))
	half := s.rng.IntN(2) == 0
	leader := int32(-1)
	offset := int64(-1)
	if sp, err := s.ctl.store.Partition(context.Background(), topic, p); err == nil && sp.Leader >= 0 {
		leader = sp.Leader
		if b := s.brokers[leader-1]; half && b.cur != nil {
			if d := b.cur.rm.Describe(topic, &p); len(d.Partitions) == 1 {
				offset = d.Partitions[0].HighWatermark / 2
			}
		}
	}
	what := fmt.Sprintf("delete records of %d below %d at broker %d", p, offset, leader)
	if offset < 0 {
		what = fmt.Sprintf("delete records of %d below the HW at broker %d", p, leader)
	}
	return what, func(ctx context.Context) {
		if leader < 0 {
			s.op.note("delete-records", replicadv1.ErrorCode_ERROR_CODE_LEADER_NOT_AVAILABLE, nil)
			return
		}
		c := s.op.brokerConn(leader)
		resp, err := invoke[*replicadv1.DeleteRecordsResponse](ctx, c, "DeleteRecords", &replicadv1.DeleteRecordsRequest{
			TimeoutMs:  5000,
			Partitions: []*replicadv1.DeleteRecordsPartition{{Topic: topic, Partition: p, Offset: offset}}})
		code := replicadv1.ErrorCode_ERROR_CODE_NONE
		if err == nil && len(resp.GetPartitions()) == 1 {
			code = resp.GetPartitions()[0].GetErrorCode()
		}
		s.op.note("delete-records", code, err)
	}
}

// brokerConn is the operator's connection to a broker (cli>bN/admin).
func (o *operator) brokerConn(b int32) *conn {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.brokerConns == nil {
		o.brokerConns = map[int32]*conn{}
	}
	c := o.brokerConns[b]
	if c == nil {
		c = &conn{net: o.conn.net, client: clientName, clientLife: 1, server: brokerName(b), kind: "admin"}
		o.brokerConns[b] = c
	}
	return c
}

// startOp runs one command on its own goroutine, as the operator's shell.
func (s *Sim) startOp(run func(ctx context.Context)) {
	s.op.busy.Store(true)
	s.op.wg.Add(1)
	go func() {
		defer s.op.wg.Done()
		defer s.op.busy.Store(false)
		ctx, cancel := context.WithTimeout(s.opCtx, opTimeout)
		defer cancel()
		run(ctx)
	}()
}

// recreate creates the topic again, as an operator who deleted it would,
// until it exists (the deletion's replicas may take a while), a minute at
// most.
func (s *Sim) recreate(ctx context.Context) {
	ctx, cancel := context.WithTimeout(s.opCtx, time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		cctx, ccancel := context.WithTimeout(ctx, opTimeout)
		resp, err := invoke[*replicadv1.CreateTopicResponse](cctx, s.op.conn, "CreateTopic", &replicadv1.CreateTopicRequest{Topic: topic,
			Partitions: int32(s.cfg.Partitions), ReplicationFactor: replicationFactor, Configs: s.topicConfigs()})
		ccancel()
		s.op.note("create", resp.GetErrorCode(), err)
		if err == nil && (resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE ||
			resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS) {
			return
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// stopShutDown stops, cleanly, the brokers whose controlled shutdown
// returned (at the scheduler's step: the life is replaced only here).
func (s *Sim) stopShutDown() {
	s.op.mu.Lock()
	reqs := s.op.shutdowns
	s.op.shutdowns = nil
	s.op.mu.Unlock()
	for _, r := range reqs {
		if r.b.cur != r.life {
			continue
		}
		s.record(fmt.Sprintf("stop %s (controlled shutdown done)", r.b.name))
		r.b.minISR = r.minISR
		r.b.shutdown()
		s.cfg.Wait()
	}
}

// healOps are what an operator does once the faults stop: create the topic
// again if it is missing, and remove the replication throttle.
func (s *Sim) healOps() {
	if s.op.busy.Load() || !s.ctl.up() {
		return
	}
	ctx := context.Background()
	if _, err := s.ctl.store.Topic(ctx, topic); err != nil {
		s.record("op re-create topic")
		s.startOp(s.recreate)
		return
	}
	if rate, err := s.ctl.store.ReplicationThrottle(ctx); err == nil && rate != 0 {
		s.record("op throttle removed")
		s.startOp(func(ctx context.Context) {
			resp, err := invoke[*replicadv1.AlterReplicationThrottleResponse](ctx, s.op.conn, "AlterReplicationThrottle",
				&replicadv1.AlterReplicationThrottleRequest{BytesPerSec: 0})
			s.op.note("throttle", resp.GetErrorCode(), err)
		})
	}
}

var _ = rand.New
