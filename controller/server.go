package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/topicconfig"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
)

// The gRPC face of the controller: validate (InvalidArgument naming the
// field; nothing changes), call the logic, map the outcome. A controller that
// is not acting answers NOT_CONTROLLER in the error_code, so clients and
// brokers move on to the next controller address.

const (
	codeNone          = replicadv1.ErrorCode_ERROR_CODE_NONE
	codeNotController = replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER
)

func invalid(field, format string, args ...any) error {
	return status.Error(codes.InvalidArgument, field+": "+fmt.Sprintf(format, args...))
}

// internalErr maps a failure of the logic (a store error) to a gRPC status;
// the caller retries. A store error that wrote nothing for certain
// (store.IsDefinite) is marked not applied, so that a client may send even a
// create or a reassignment again; any other (a write of unknown outcome)
// may have been applied, and such a request is checked before it is resent.
func internalErr(err error) error {
	msg := "controller: " + err.Error()
	if errors.Is(err, store.ErrNotLeader) {
		msg = err.Error()
	}
	if store.IsDefinite(err) {
		return grpcx.NotApplied(msg)
	}
	return status.Error(codes.Unavailable, msg)
}

func validateBrokerID(field string, id int32) error {
	if id < 0 {
		return invalid(field, "must not be negative (got %d)", id)
	}
	return nil
}

func validateTopic(field, topic string) error {
	if err := tp.ValidateTopic(topic); err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

// validatePartitionRefs checks each partition of a list named field.
func validatePartitionRefs(field string, refs []*replicadv1.PartitionRef) error {
	for i, p := range refs {
		path := fmt.Sprintf("%s[%d]", field, i)
		if err := validateTopic(path+".topic", p.GetTopic()); err != nil {
			return err
		}
		if p.GetPartition() < 0 {
			return invalid(path+".partition", "must not be negative (got %d)", p.GetPartition())
		}
	}
	return nil
}

// RegisterBroker implements ControllerService.
func (c *Controller) RegisterBroker(ctx context.Context, req *replicadv1.RegisterBrokerRequest) (*replicadv1.RegisterBrokerResponse, error) {
	if err := validateBrokerID("broker_id", req.GetBrokerId()); err != nil {
		return nil, err
	}
	if req.GetHost() == "" {
		return nil, invalid("host", "must not be empty")
	}
	if p := req.GetPort(); p <= 0 || p > 65535 {
		return nil, invalid("port", "must be in 1..65535 (got %d)", p)
	}
	if m := req.GetMinInsyncReplicas(); m < 0 {
		return nil, invalid("min_insync_replicas", "must not be negative (got %d)", m)
	}
	if m := req.GetMaxPartitions(); m < 0 {
		return nil, invalid("max_partitions", "must not be negative (got %d)", m)
	}
	if err := validatePartitionRefs("offline_partitions", req.GetOfflinePartitions()); err != nil {
		return nil, err
	}
	info, epoch, err := c.registerBroker(ctx, store.Broker{ID: req.GetBrokerId(), Host: req.GetHost(), Port: req.GetPort(),
		MinInsyncReplicas: req.GetMinInsyncReplicas(), MaxPartitions: req.GetMaxPartitions()},
		registration{incarnation: req.GetIncarnationId(), previousEpoch: req.GetPreviousBrokerEpoch(), offline: req.GetOfflinePartitions()})
	if errors.Is(err, errNotController) {
		c.hintActive(ctx)
		return &replicadv1.RegisterBrokerResponse{ErrorCode: codeNotController}, nil
	}
	if errors.Is(err, errRegistrationInProgress) {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if errors.Is(err, errDuplicateRegistration) {
		return &replicadv1.RegisterBrokerResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_DUPLICATE_BROKER_REGISTRATION}, nil
	}
	if err != nil {
		return nil, internalErr(err)
	}
	return &replicadv1.RegisterBrokerResponse{BrokerEpoch: info.Epoch, ControllerEpoch: epoch, ControllerId: c.cfg.ID,
		SessionTimeoutMs: int32(c.cfg.SessionTimeout.Milliseconds())}, nil
}

// BrokerHeartbeat implements ControllerService.
func (c *Controller) BrokerHeartbeat(ctx context.Context, req *replicadv1.BrokerHeartbeatRequest) (*replicadv1.BrokerHeartbeatResponse, error) {
	if err := validateBrokerID("broker_id", req.GetBrokerId()); err != nil {
		return nil, err
	}
	if err := validatePartitionRefs("offline_partitions", req.GetOfflinePartitions()); err != nil {
		return nil, err
	}
	code, fenced, epoch, err := c.heartbeat(ctx, req.GetBrokerId(), req.GetBrokerEpoch(), req.GetWantShutdown(), req.GetOfflinePartitions())
	if errors.Is(err, errNotController) {
		c.hintActive(ctx)
		return &replicadv1.BrokerHeartbeatResponse{ErrorCode: codeNotController}, nil
	}
	if err != nil {
		return nil, internalErr(err)
	}
	return &replicadv1.BrokerHeartbeatResponse{ErrorCode: code, IsFenced: fenced, ControllerId: c.cfg.ID, ControllerEpoch: epoch}, nil
}

// AlterPartition implements ControllerService.
func (c *Controller) AlterPartition(ctx context.Context, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
	if err := validateBrokerID("broker_id", req.GetBrokerId()); err != nil {
		return nil, err
	}
	seen := make(map[partitionKey]bool, len(req.GetPartitions()))
	for i, item := range req.GetPartitions() {
		path := fmt.Sprintf("partitions[%d]", i)
		if err := validateTopic(path+".topic", item.GetTopic()); err != nil {
			return nil, err
		}
		if item.GetPartition() < 0 {
			return nil, invalid(path+".partition", "must not be negative (got %d)", item.GetPartition())
		}
		k := partitionKey{item.GetTopic(), item.GetPartition()}
		if seen[k] {
			return nil, invalid(path, "partition %s-%d appears twice", k.topic, k.partition)
		}
		seen[k] = true
		if len(item.GetNewIsr()) == 0 {
			return nil, invalid(path+".new_isr", "must not be empty")
		}
	}
	resp, err := c.alterPartition(ctx, req)
	if errors.Is(err, errNotController) {
		c.hintActive(ctx)
		return &replicadv1.AlterPartitionResponse{ErrorCode: codeNotController}, nil
	}
	if err != nil {
		return nil, internalErr(err)
	}
	return resp, nil
}

// maxPartitionsPerTopic bounds CreateTopic (Kafka has no hard limit; this
// keeps one request's store transaction and LeaderAndIsr batches sane).
const maxPartitionsPerTopic = 100_000

// CreateTopic implements ControllerService.
func (c *Controller) CreateTopic(ctx context.Context, req *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return nil, err
	}
	if n := req.GetPartitions(); n <= 0 || n > maxPartitionsPerTopic {
		return nil, invalid("partitions", "must be in 1..%d (got %d)", maxPartitionsPerTopic, n)
	}
	// Each replica lives in a dir named "topic-partition", which must fit
	// Linux's 255 bytes: a long topic has room for fewer partition digits.
	if most := tp.MaxPartitionsFor(req.GetTopic()); int64(req.GetPartitions()) > most {
		return nil, invalid("partitions", "a %d-character topic can have at most %d partitions (its dir names \"topic-partition\" must fit in %d bytes) (got %d)",
			len(req.GetTopic()), most, tp.MaxDirNameLength, req.GetPartitions())
	}
	if rf := req.GetReplicationFactor(); rf <= 0 {
		return nil, invalid("replication_factor", "must be positive (got %d)", rf)
	}
	if err := validateConfigs("configs", req.GetConfigs()); err != nil {
		return nil, err
	}
	parts, err := c.createTopic(ctx, req.GetTopic(), int(req.GetPartitions()), int(req.GetReplicationFactor()), req.GetConfigs())
	code, msg, err := c.outcome(err)
	if err != nil {
		return nil, err
	}
	resp := &replicadv1.CreateTopicResponse{ErrorCode: code, ErrorMessage: msg}
	for _, p := range parts {
		resp.Partitions = append(resp.Partitions, clusterPartition(p))
	}
	return resp, nil
}

// validateConfigs refuses config overrides with an unknown key or a bad
// value, naming it (field[key]).
func validateConfigs(field string, configs map[string]string) error {
	var ce *topicconfig.Error
	if err := topicconfig.Validate(configs); errors.As(err, &ce) {
		return invalid(field+"["+ce.Key+"]", "%s", ce.Error())
	} else if err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

// AlterTopicConfig implements ControllerService.
func (c *Controller) AlterTopicConfig(ctx context.Context, req *replicadv1.AlterTopicConfigRequest) (*replicadv1.AlterTopicConfigResponse, error) {
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return nil, err
	}
	if err := validateConfigs("set", req.GetSet()); err != nil {
		return nil, err
	}
	for i, k := range req.GetDelete() {
		field := fmt.Sprintf("delete[%d]", i)
		if err := topicconfig.ValidateKey(k); err != nil {
			return nil, invalid(field, "%v", err)
		}
		if _, ok := req.GetSet()[k]; ok {
			return nil, invalid(field, "config %q is both set and deleted", k)
		}
	}
	if len(req.GetSet()) == 0 && len(req.GetDelete()) == 0 {
		return nil, invalid("set", "nothing to change: set or delete at least one config")
	}
	stored, err := c.alterTopicConfig(ctx, req.GetTopic(), req.GetSet(), req.GetDelete(), req.GetValidateOnly())
	code, msg, err := c.outcome(err)
	if err != nil {
		return nil, err
	}
	return &replicadv1.AlterTopicConfigResponse{ErrorCode: code, ErrorMessage: msg, Configs: stored.Configs, Version: stored.Version}, nil
}

// DescribeTopicConfig implements ControllerService.
func (c *Controller) DescribeTopicConfig(ctx context.Context, req *replicadv1.DescribeTopicConfigRequest) (*replicadv1.DescribeTopicConfigResponse, error) {
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return nil, err
	}
	entries, version, err := c.describeTopicConfig(req.GetTopic())
	code, msg, err := c.outcome(err)
	if err != nil {
		return nil, err
	}
	return &replicadv1.DescribeTopicConfigResponse{ErrorCode: code, ErrorMessage: msg, Entries: entries, Version: version}, nil
}

// DeleteTopic implements ControllerService.
func (c *Controller) DeleteTopic(ctx context.Context, req *replicadv1.DeleteTopicRequest) (*replicadv1.DeleteTopicResponse, error) {
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return nil, err
	}
	code, msg, err := c.outcome(c.deleteTopic(ctx, req.GetTopic()))
	if err != nil {
		return nil, err
	}
	return &replicadv1.DeleteTopicResponse{ErrorCode: code, ErrorMessage: msg}, nil
}

// ElectLeader implements ControllerService.
func (c *Controller) ElectLeader(ctx context.Context, req *replicadv1.ElectLeaderRequest) (*replicadv1.ElectLeaderResponse, error) {
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return nil, err
	}
	if req.GetPartition() < 0 {
		return nil, invalid("partition", "must not be negative (got %d)", req.GetPartition())
	}
	if req.Leader != nil {
		if err := validateBrokerID("leader", req.GetLeader()); err != nil {
			return nil, err
		}
	}
	p, err := c.electLeader(ctx, req.GetTopic(), req.GetPartition(), req.Leader)
	code, msg, err := c.outcome(err)
	if err != nil {
		return nil, err
	}
	resp := &replicadv1.ElectLeaderResponse{ErrorCode: code, ErrorMessage: msg}
	if p.Topic != "" {
		resp.Partition = clusterPartition(p)
	}
	return resp, nil
}

// ElectLeaders implements ControllerService: Kafka's ElectLeaders, of the
// PREFERRED type, with an outcome per partition.
func (c *Controller) ElectLeaders(ctx context.Context, req *replicadv1.ElectLeadersRequest) (*replicadv1.ElectLeadersResponse, error) {
	if req.GetElectionType() != replicadv1.ElectionType_ELECTION_TYPE_PREFERRED {
		return nil, invalid("election_type", "must be ELECTION_TYPE_PREFERRED (got %v)", req.GetElectionType())
	}
	reqs := make([]electRequest, 0, len(req.GetTopics()))
	for i, t := range req.GetTopics() {
		if err := validateTopic(fmt.Sprintf("topics[%d].topic", i), t.GetTopic()); err != nil {
			return nil, err
		}
		for j, n := range t.GetPartitions() {
			if n < 0 {
				return nil, invalid(fmt.Sprintf("topics[%d].partitions[%d]", i, j), "must not be negative (got %d)", n)
			}
		}
		reqs = append(reqs, electRequest{topic: t.GetTopic(), partitions: t.GetPartitions()})
	}
	results, err := c.electPreferred(ctx, reqs)
	code, msg, err := c.outcome(err)
	if err != nil {
		return nil, err
	}
	resp := &replicadv1.ElectLeadersResponse{ErrorCode: code, ErrorMessage: msg}
	for _, r := range results {
		res := &replicadv1.ElectLeadersResult{Topic: r.topic, Partition: r.partition, ErrorCode: r.code, ErrorMessage: r.msg}
		if r.state.Topic != "" {
			res.State = clusterPartition(r.state)
		}
		resp.Results = append(resp.Results, res)
	}
	return resp, nil
}

// ReassignPartition implements ControllerService.
func (c *Controller) ReassignPartition(ctx context.Context, req *replicadv1.ReassignPartitionRequest) (*replicadv1.ReassignPartitionResponse, error) {
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return nil, err
	}
	if req.GetPartition() < 0 {
		return nil, invalid("partition", "must not be negative (got %d)", req.GetPartition())
	}
	if req.GetCancel() {
		if len(req.GetReplicas()) > 0 {
			return nil, invalid("replicas", "must be empty with cancel (got %v)", req.GetReplicas())
		}
		p, err := c.cancelReassignment(ctx, req.GetTopic(), req.GetPartition())
		return c.reassignAnswer(p, err)
	}
	if len(req.GetReplicas()) == 0 {
		return nil, invalid("replicas", "must not be empty")
	}
	for i, r := range req.GetReplicas() {
		if err := validateBrokerID(fmt.Sprintf("replicas[%d]", i), r); err != nil {
			return nil, err
		}
		if slices.Index(req.GetReplicas(), r) != i {
			return nil, invalid(fmt.Sprintf("replicas[%d]", i), "broker %d appears twice", r)
		}
	}
	p, err := c.reassignPartition(ctx, req.GetTopic(), req.GetPartition(), req.GetReplicas())
	return c.reassignAnswer(p, err)
}

func (c *Controller) reassignAnswer(p store.Partition, err error) (*replicadv1.ReassignPartitionResponse, error) {
	code, msg, err := c.outcome(err)
	if err != nil {
		return nil, err
	}
	resp := &replicadv1.ReassignPartitionResponse{ErrorCode: code, ErrorMessage: msg}
	if p.Topic != "" {
		resp.Partition = clusterPartition(p)
	}
	return resp, nil
}

// AlterReplicationThrottle implements ControllerService.
func (c *Controller) AlterReplicationThrottle(ctx context.Context, req *replicadv1.AlterReplicationThrottleRequest) (*replicadv1.AlterReplicationThrottleResponse, error) {
	if req.GetBytesPerSec() < 0 {
		return nil, invalid("bytes_per_sec", "must not be negative (got %d)", req.GetBytesPerSec())
	}
	previous, err := c.alterReplicationThrottle(ctx, req.GetBytesPerSec())
	code, msg, err := c.outcome(err)
	if err != nil {
		return nil, err
	}
	return &replicadv1.AlterReplicationThrottleResponse{ErrorCode: code, ErrorMessage: msg, PreviousBytesPerSec: previous}, nil
}

// DescribeCluster implements ControllerService.
func (c *Controller) DescribeCluster(context.Context, *replicadv1.DescribeClusterRequest) (*replicadv1.DescribeClusterResponse, error) {
	v, err := c.describe()
	if errors.Is(err, errNotController) {
		return &replicadv1.DescribeClusterResponse{ErrorCode: codeNotController, ErrorMessage: c.notActiveMessage()}, nil
	}
	if err != nil {
		return nil, internalErr(err)
	}
	resp := &replicadv1.DescribeClusterResponse{ControllerEpoch: v.epoch,
		SessionTimeoutMs:      int32(c.cfg.SessionTimeout.Milliseconds()),
		UncleanLeaderElection: c.cfg.UncleanLeaderElection}
	for _, b := range v.brokers {
		resp.Brokers = append(resp.Brokers, &replicadv1.BrokerDescription{Id: b.info.ID, Host: b.info.Host, Port: b.info.Port,
			BrokerEpoch: b.info.Epoch, Alive: b.alive})
	}
	for i, p := range v.partitions {
		cp := clusterPartition(p)
		cp.OfflineReplicas = v.offline[keyOf(p)]
		cp.MinInsyncReplicas = int32(v.minIsr[i])
		resp.Partitions = append(resp.Partitions, cp)
	}
	for _, d := range v.deleted {
		dt := &replicadv1.DeletedTopic{Topic: d.Name, TopicId: d.ID}
		for _, pr := range d.Pending {
			dt.Pending = append(dt.Pending, &replicadv1.PendingReplicas{Partition: pr.Partition, Brokers: slices.Clone(pr.Brokers)})
		}
		resp.PendingDeletions = append(resp.PendingDeletions, dt)
	}
	return resp, nil
}

// ControlledShutdown implements ControllerService.
func (c *Controller) ControlledShutdown(ctx context.Context, req *replicadv1.ControlledShutdownRequest) (*replicadv1.ControlledShutdownResponse, error) {
	if err := validateBrokerID("broker_id", req.GetBrokerId()); err != nil {
		return nil, err
	}
	code, remaining, err := c.controlledShutdown(ctx, req.GetBrokerId(), req.GetBrokerEpoch())
	if errors.Is(err, errNotController) {
		c.hintActive(ctx)
		return &replicadv1.ControlledShutdownResponse{ErrorCode: codeNotController}, nil
	}
	if err != nil {
		return nil, internalErr(err)
	}
	resp := &replicadv1.ControlledShutdownResponse{ErrorCode: code}
	for _, p := range remaining {
		resp.RemainingPartitions = append(resp.RemainingPartitions, &replicadv1.PartitionError{Topic: p.Topic, Partition: p.Partition})
	}
	return resp, nil
}

// outcome splits an admin call's error into the answer's error code and
// message, or a gRPC error for failures the caller should retry.
func (c *Controller) outcome(err error) (replicadv1.ErrorCode, string, error) {
	var ae *adminError
	switch {
	case err == nil:
		return codeNone, "", nil
	case errors.Is(err, errNotController), errors.Is(err, store.ErrNotLeader):
		// A store write refused for a lost election wrote nothing, and
		// this controller is no longer the active one: NOT_CONTROLLER
		// sends the client on to the next, where an Unavailable (which
		// may follow a write that landed) would stop a create there.
		return codeNotController, c.notActiveMessage(), nil
	case errors.As(err, &ae):
		return ae.code, ae.msg, nil
	default:
		return 0, "", internalErr(err)
	}
}

func clusterPartition(p store.Partition) *replicadv1.ClusterPartition {
	return &replicadv1.ClusterPartition{Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch, Isr: slices.Clone(p.ISR), Replicas: slices.Clone(p.Replicas),
		AddingReplicas: slices.Clone(p.AddingReplicas), RemovingReplicas: slices.Clone(p.RemovingReplicas),
		Elr: slices.Clone(p.ELR), LastKnownElr: slices.Clone(p.LastKnownELR), TopicId: p.TopicID}
}

var _ replicadv1.ControllerServiceServer = (*Controller)(nil)
