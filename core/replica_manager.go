package core

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// Config configures a ReplicaManager.
type Config struct {
	BrokerID             int32
	LogDirs              []string
	LogConfig            log.Config
	HWCheckpointInterval time.Duration
	ReplicaLagTimeMax    time.Duration
	// Retention is how much of each log its leader keeps (Kafka's
	// log.retention.ms and log.retention.bytes); nil: DefaultRetention.
	Retention *log.Retention
	// RetentionCheckInterval is how often leaders delete what retention
	// no longer keeps (Kafka's log.retention.check.interval.ms); 0:
	// DefaultRetentionCheckInterval.
	RetentionCheckInterval time.Duration
	MinInsyncReplicas      int
	Clock                  clock.Clock
	Logger                 zerolog.Logger
	// StateChangeLevel, when set, is the level of the state-change logger
	// (logger=state.change) alone, below or above Logger's: Kafka keeps its
	// state-change log apart so that its per-partition lines can be on
	// without the rest of the broker at that level.
	StateChangeLevel *zerolog.Level
	// Tracer records state changes; nil means no tracing.
	Tracer trace.Tracer
	// Fetchers receives the partitions this broker follows. Nil: followers do
	// not fetch (no replication configured).
	Fetchers FetcherManager
	// AlterLogDirsFetchers fills the future logs of replicas being moved
	// between log dirs, from this broker's own current logs (Kafka's
	// ReplicaAlterLogDirsManager): a second fetcher manager whose source is
	// FetchFromCurrentLog and whose replicas are FutureReplicaLog. Nil: a
	// move creates its future log but never progresses.
	AlterLogDirsFetchers FetcherManager
	// IsrChanger commits ISR changes; nil means StandaloneIsrChanger (no
	// controller: the leader applies them itself).
	IsrChanger IsrChanger
	// OnLeadershipChange runs after each LeaderAndIsr with the partitions that
	// became leader and follower (Kafka's onLeadershipChange callback).
	OnLeadershipChange func(leaders, followers []tp.TopicPartition)
	// BrokerEpoch returns this broker's current epoch, given by the
	// controller at registration (it changes when the broker re-registers).
	// LeaderAndIsr, StopReplica and UpdateMetadata requests carrying an
	// older, positive broker epoch were meant for an earlier incarnation of
	// this broker and are rejected with STALE_BROKER_EPOCH (Kafka's
	// isBrokerEpochStale). Nil: no check (no controller).
	BrokerEpoch func() int64
	// Metrics counts ISR changes and times HW checkpoints (see
	// MetricsRecorder); nil records nothing.
	Metrics MetricsRecorder
	// BootID names this boot of the machine, for PreviousBrokerEpoch (see
	// logmgr.Config.BootID); empty: only a clean shutdown counts as a life
	// that lost nothing.
	BootID string
	// FS is the file system of the log dirs, for the logs and every
	// checkpoint; nil means the real one (vfs.OS). Tests pass a simulated
	// disk (core/vfs/crashfs).
	FS vfs.FS
	// MaxPartitions is the most partitions this broker hosts (its
	// --max-partitions, Kafka's max.broker.partitions): a LeaderAndIsr's
	// new partitions beyond it are refused (see refuseOverBudget). 0: no
	// limit.
	MaxPartitions int
	// ProducerIDExpiration: an idempotent producer whose last batch on a
	// partition is this old (by the batch's max timestamp) is forgotten
	// there at the next retention check (--producer-id-expiration, Kafka's
	// producer.id.expiration.ms). 0: LogConfig's (a day by default);
	// negative: never.
	ProducerIDExpiration time.Duration
	// MaxProducersPerPartition bounds the producers a partition holds
	// state for (--max-producers-per-partition); past it the longest idle
	// go. 0: LogConfig's (log.DefaultMaxProducers); negative: no bound.
	MaxProducersPerPartition int
}

func (c *Config) setDefaults() {
	c.FS = vfs.Or(c.FS)
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.HWCheckpointInterval <= 0 {
		c.HWCheckpointInterval = 5 * time.Second
	}
	if c.ReplicaLagTimeMax <= 0 {
		c.ReplicaLagTimeMax = 30 * time.Second
	}
	if c.Retention == nil {
		r := DefaultRetention
		c.Retention = &r
	}
	if c.RetentionCheckInterval <= 0 {
		c.RetentionCheckInterval = DefaultRetentionCheckInterval
	}
	if c.MinInsyncReplicas <= 0 {
		c.MinInsyncReplicas = 1
	}
	if c.LogConfig == (log.Config{}) {
		c.LogConfig = log.DefaultConfig()
	}
	switch {
	case c.ProducerIDExpiration > 0:
		c.LogConfig.ProducerIDExpirationMs = max(c.ProducerIDExpiration.Milliseconds(), 1)
	case c.ProducerIDExpiration < 0:
		c.LogConfig.ProducerIDExpirationMs = -1
	}
	if c.MaxProducersPerPartition != 0 {
		c.LogConfig.MaxProducers = max(c.MaxProducersPerPartition, -1)
	}
	if c.Tracer == nil {
		c.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if c.Fetchers == nil {
		c.Fetchers = noFetchers{}
	}
	if c.AlterLogDirsFetchers == nil {
		c.AlterLogDirsFetchers = noFetchers{}
	}
	if c.IsrChanger == nil {
		c.IsrChanger = StandaloneIsrChanger{}
	}
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
}

// hostedPartition is an entry of the hosted-partition map (Kafka's
// HostedPartition): Online, or Offline when its log dir failed. A partition
// that is not in the map is Kafka's HostedPartition.None.
type hostedPartition struct {
	partition *Partition
	// offline is set under partitionsMu, and read without it by request
	// paths that looked the entry up first: hence atomic.
	offline atomic.Bool
}

// ReplicaManager is a broker's replica state machine (Kafka's ReplicaManager).
type ReplicaManager struct {
	cfg      Config
	logger   zerolog.Logger
	stateLog zerolog.Logger // logger=state.change, Kafka's stateChangeLogger
	tracer   trace.Tracer
	logs     *logmgr.Manager
	metadata *metadataCache
	env      *partitionEnv
	// throttle is the replication throttle the controller set (throttle.go).
	throttle *tokenBucket

	// stateChangeMu is Kafka's replicaStateChangeLock: one LeaderAndIsr,
	// StopReplica or log dir failure is handled at a time.
	stateChangeMu   sync.Mutex
	controllerEpoch atomic.Int32

	partitionsMu sync.RWMutex
	partitions   map[tp.TopicPartition]*hostedPartition

	checkpointMu    sync.Mutex // one HW checkpoint write at a time
	hwCheckpointing sync.Once  // the HW checkpoint loop starts after the first LeaderAndIsr

	// Periodic work (see every): its timers, and runs in progress.
	loopsMu      sync.Mutex
	loopsStopped bool
	loopTimers   map[clock.Timer]struct{}
	loopsRunning sync.WaitGroup

	// retentionMu: one retention check at a time, periodic or RunRetention.
	retentionMu sync.Mutex
	// The periodic retention check's last run and next one, in Unix ms
	// (0: not yet), for DescribePartitions.
	lastRetentionCheckMs atomic.Int64
	nextRetentionCheckMs atomic.Int64

	// brokerEpochs is the newest registration epoch of each broker that
	// the controller named (LeaderAndIsr live_leaders, UpdateMetadata
	// live_brokers), to fence fetchers of a broker's previous life. Only the
	// controller is believed: what a fetch claims is never recorded, so a
	// forged fetch cannot fence the real broker (issue 12). A leaf lock:
	// nothing else is taken while it is held.
	brokerEpochsMu sync.Mutex
	brokerEpochs   map[int32]int64

	// moveChecks are the partitions whose future log was seen caught up,
	// waiting for moveCheckLoop to try the swap.
	moveChecksMu  sync.Mutex
	moveChecks    map[tp.TopicPartition]struct{}
	moveCheckWake chan struct{}

	shuttingDown atomic.Bool
	// leaving is set by BeginShutdown (and Shutdown): the broker is on its
	// way out, see BeginShutdown.
	leaving   atomic.Bool
	stopCh    chan struct{}
	wg        sync.WaitGroup
	fatalOnce sync.Once
	fatal     chan error

	// overBudget counts the partitions refused for MaxPartitions (see
	// refuseOverBudget). Guarded by stateChangeMu.
	overBudget int
}

// NewReplicaManager opens the log dirs, reads each dir's HW checkpoint once
// (a malformed one takes its dir offline) and starts the log dir failure
// handler.
func NewReplicaManager(cfg Config) (*ReplicaManager, error) {
	cfg.setDefaults()
	stateLog := stateChangeLogger(cfg)
	logs, err := logmgr.Open(logmgr.Config{Dirs: cfg.LogDirs, BrokerID: cfg.BrokerID, LogConfig: cfg.LogConfig, Logger: cfg.Logger,
		BootID: cfg.BootID, FS: cfg.FS, OnProducerStateRebuilt: producerStateRebuilt(stateLog, cfg.Tracer)})
	if err != nil {
		return nil, err
	}
	rm := &ReplicaManager{
		cfg:        cfg,
		logger:     cfg.Logger,
		stateLog:   stateLog,
		tracer:     cfg.Tracer,
		logs:       logs,
		metadata:   newMetadataCache(),
		throttle:   newTokenBucket(cfg.Clock.Now),
		partitions: make(map[tp.TopicPartition]*hostedPartition),
		stopCh:     make(chan struct{}),
		fatal:      make(chan error, 1),
		loopTimers: make(map[clock.Timer]struct{}),

		moveCheckWake: make(chan struct{}, 1),
	}
	rm.controllerEpoch.Store(-1)
	rm.env = &partitionEnv{
		brokerID:      cfg.BrokerID,
		clock:         cfg.Clock,
		logs:          logs,
		topicDefaults: cfg.topicDefaults(),
		logger:        cfg.Logger,
		stateLog:      stateLog,
		isrChanger:    cfg.IsrChanger,
		metrics:       cfg.Metrics,
		tracer:        cfg.Tracer,
	}
	rm.loadHighWatermarks()
	if len(rm.onlineDirs()) == 0 {
		_ = logs.Shutdown()
		return nil, fmt.Errorf("open replica manager: %w", logmgr.ErrNoOnlineDir)
	}
	rm.wg.Add(2)
	go rm.dirFailureLoop()
	go rm.moveCheckLoop()
	return rm, nil
}

// loadHighWatermarks reads every online dir's replication-offset-checkpoint
// once, at start-up, and gives each loaded log its HW (logmgr's
// LoadHighWatermarks). Reading the file once instead of per partition is the
// lesson of Kafka's LazyOffsetCheckpoints: a LeaderAndIsr for thousands of
// partitions must not parse it thousands of times. From then on the HW lives
// in the log, and the checkpoint file is only ever written. A dir whose file
// cannot be read (or, claiming more than its logs hold, rewritten) goes
// offline.
func (rm *ReplicaManager) loadHighWatermarks() {
	for dir, err := range rm.logs.LoadHighWatermarks() {
		rm.logger.Error().Err(err).Str("log_dir", dir).Msg("cannot load the HW checkpoint; taking the log dir offline")
		rm.logs.MarkDirOffline(dir, err)
	}
}

// PreviousBrokerEpoch is the broker epoch of this broker's previous life if
// that life lost nothing it had written, -1 otherwise: what its registration
// tells the controller (see logmgr.Manager.PreviousBrokerEpoch).
func (rm *ReplicaManager) PreviousBrokerEpoch() int64 { return rm.logs.PreviousBrokerEpoch() }

// FileCacheStats are the figures of the cache of open log segment and
// index files (--max-open-files): metrics and tests.
func (rm *ReplicaManager) FileCacheStats() log.FileCacheStats { return rm.logs.FileCacheStats() }

// RecordBrokerEpoch notes, durably in every log dir, the broker epoch of a
// registration: the next life compares it with the controller's.
func (rm *ReplicaManager) RecordBrokerEpoch(epoch int64) error {
	return rm.logs.RecordBrokerEpoch(epoch)
}

// BrokerID is this broker's id.
func (rm *ReplicaManager) BrokerID() int32 { return rm.cfg.BrokerID }

// MaxBatchBytes is the largest produce batch accepted.
func (rm *ReplicaManager) MaxBatchBytes() int { return rm.cfg.LogConfig.MaxBatchBytes }

// ControllerEpoch is the newest controller epoch this broker has accepted (-1: none yet).
func (rm *ReplicaManager) ControllerEpoch() int32 { return rm.controllerEpoch.Load() }

// Fatal yields an error when no log dir is left online: the broker must exit non-zero.
func (rm *ReplicaManager) Fatal() <-chan error { return rm.fatal }

// LiveBrokers returns the brokers the metadata cache knows to be alive.
func (rm *ReplicaManager) LiveBrokers() []Broker { return rm.metadata.aliveBrokers() }

// UpdateMetadata replaces the live broker list and records the partition
// states it carries (the Metadata view); a request from an older controller
// is rejected.
func (rm *ReplicaManager) UpdateMetadata(ctx context.Context, req UpdateMetadataRequest) ErrorCode {
	rm.stateChangeMu.Lock()
	defer rm.stateChangeMu.Unlock()
	if rm.isBrokerEpochStale("UpdateMetadata", req.ControllerID, req.BrokerEpoch) {
		return ErrStaleBrokerEpoch
	}
	if !rm.acceptControllerEpochLocked("UpdateMetadata", req.ControllerID, req.ControllerEpoch) {
		return ErrStaleControllerEpoch
	}
	rm.metadata.replace(req.LiveBrokers)
	rm.metadata.updatePartitions(req.PartitionStates)
	rm.learnBrokerEpochs(req.LiveBrokers)
	rm.applyTopicConfigs(ctx, req.PartitionStates)
	if req.Throttle != nil && rm.throttle.set(req.ControllerEpoch, *req.Throttle) {
		rm.stateLog.Debug().Int64("bytes_per_sec", req.Throttle.BytesPerSec).Int64("version", req.Throttle.Version).Msg("Replication throttle set")
	}
	slog := rm.requestStateLog(ctx, req.ControllerID, req.ControllerEpoch)
	slog.Info().Int("live_brokers", len(req.LiveBrokers)).Int("partitions", len(req.PartitionStates)).Msg("Updated metadata")
	return ErrNone
}

// isBrokerEpochStale reports whether a controller request was meant for an
// earlier incarnation of this broker (Kafka's isBrokerEpochStale): its broker
// epoch is positive and older than the current one. Epoch 0 (or -1, Kafka's
// UNKNOWN_BROKER_EPOCH) comes from no controller, a hand-driven ctlclient,
// and passes. A newer epoch passes too: the controller may send it before
// the broker's registration answer arrives.
func (rm *ReplicaManager) isBrokerEpochStale(request string, controllerID int32, brokerEpoch int64) bool {
	if rm.cfg.BrokerEpoch == nil || brokerEpoch <= 0 {
		return false
	}
	current := rm.cfg.BrokerEpoch()
	if brokerEpoch >= current {
		return false
	}
	rm.stateLog.Warn().Str("request", request).Int32("controller_id", controllerID).Int64("broker_epoch", brokerEpoch).
		Int64("current_broker_epoch", current).Msg("Ignoring " + request + " request meant for an earlier incarnation of this broker")
	return true
}

// acceptControllerEpochLocked fences a request from a controller older than
// the newest this broker has heard from (the seed's first check), and
// otherwise records the request's controller epoch. Runs under stateChangeMu.
func (rm *ReplicaManager) acceptControllerEpochLocked(request string, controllerID, controllerEpoch int32) bool {
	if current := rm.controllerEpoch.Load(); controllerEpoch < current {
		rm.stateLog.Warn().Str("request", request).Int32("controller_id", controllerID).Int32("controller_epoch", controllerEpoch).
			Int32("current_controller_epoch", current).Msg("Ignoring " + request + " request since its controller epoch is old")
		return false
	}
	rm.controllerEpoch.Store(controllerEpoch)
	rm.metadata.setController(controllerID)
	return true
}

// getPartition returns the hosted entry for t, or nil (HostedPartition.None).
func (rm *ReplicaManager) getPartition(t tp.TopicPartition) *hostedPartition {
	rm.partitionsMu.RLock()
	defer rm.partitionsMu.RUnlock()
	return rm.partitions[t]
}

// onlinePartition returns the partition if it is hosted and online, with the
// error code for why not otherwise.
func (rm *ReplicaManager) onlinePartition(t tp.TopicPartition) (*Partition, ErrorCode) {
	h := rm.getPartition(t)
	switch {
	case h == nil:
		return nil, ErrUnknownTopicOrPartition
	case h.offline.Load():
		return nil, ErrStorageError
	}
	return h.partition, ErrNone
}

func (rm *ReplicaManager) onlineDirs() []string {
	var out []string
	for _, d := range rm.logs.Dirs() {
		if d.Online {
			out = append(out, d.Path)
		}
	}
	return out
}

// OfflinePartitions lists, sorted, the hosted partitions whose replica is
// offline: its log dir failed, or its log could not be opened or created.
// The broker reports them to the controller in every heartbeat, which moves
// their leadership and ISR membership away and elects none of them.
func (rm *ReplicaManager) OfflinePartitions() []tp.TopicPartition {
	rm.partitionsMu.RLock()
	var out []tp.TopicPartition
	for t, h := range rm.partitions {
		if h.offline.Load() {
			out = append(out, t)
		}
	}
	rm.partitionsMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return tp.Less(out[i], out[j]) })
	return out
}

// Describe reports hosted replicas; topic "" means all, partition nil all of the topic.
func (rm *ReplicaManager) Describe(topic string, partition *int32) Description {
	rm.partitionsMu.RLock()
	hosted := make([]*hostedPartition, 0, len(rm.partitions))
	for t, h := range rm.partitions {
		if topic != "" && t.Topic != topic {
			continue
		}
		if partition != nil && t.Partition != *partition {
			continue
		}
		hosted = append(hosted, h)
	}
	rm.partitionsMu.RUnlock()
	d := Description{BrokerID: rm.cfg.BrokerID, ControllerEpoch: rm.controllerEpoch.Load()}
	d.LastRetentionCheck, d.NextRetentionCheck = rm.RetentionCheckTimes()
	for _, h := range hosted {
		in := h.partition.info()
		if h.offline.Load() {
			in.Role = RoleOffline
			in.HighWatermark, in.LogEndOffset, in.LogStartOffset, in.LogDir = -1, -1, -1, ""
		}
		d.Partitions = append(d.Partitions, in)
	}
	sort.Slice(d.Partitions, func(i, j int) bool {
		return tp.Less(d.Partitions[i].TopicPartition, d.Partitions[j].TopicPartition)
	})
	for _, di := range rm.logs.Dirs() {
		d.LogDirs = append(d.LogDirs, LogDirInfo{Path: di.Path, Online: di.Online, PartitionCount: di.Partitions})
	}
	return d
}

// BeginShutdown tells the replica manager that the broker is leaving (it
// got SIGTERM), before its controlled shutdown. From then on:
//
//   - A long controller request stops between partitions instead of
//     holding the state-change lock for minutes: a StopReplica deletes no
//     further log, and a LeaderAndIsr creates none, answering the partitions
//     left BROKER_NOT_AVAILABLE (the controller resends pending deletions
//     and the full state at the broker's next registration). What was done
//     is done whole, partition by partition, so a restart finds a
//     consistent state. Leadership changes of existing logs still apply:
//     the controlled shutdown needs them.
//   - Follower transitions start no fetcher and stop the fetchers of the
//     partitions they name: the controller has taken the broker out of
//     their ISRs, and fetching them would only load their new leaders while
//     they take over.
//
// Idempotent; Shutdown implies it.
func (rm *ReplicaManager) BeginShutdown() {
	rm.leaving.Store(true)
}

// Shutdown stops fetchers, fails waiting requests, flushes the logs,
// checkpoints HWs, and closes the logs. In-flight requests should have been
// drained by the caller (the gRPC server's graceful stop) first; a
// controller request still running (the server stops waiting for handlers
// after its timeout) ends at its next partition (see BeginShutdown), and
// Shutdown waits for it, for as long as ctx allows, so that no state change
// is half done when the logs are flushed, checkpointed and closed.
func (rm *ReplicaManager) Shutdown(ctx context.Context) error {
	rm.BeginShutdown()
	if !rm.shuttingDown.CompareAndSwap(false, true) {
		return nil
	}
	rm.cfg.Fetchers.Shutdown()
	rm.cfg.AlterLogDirsFetchers.Shutdown()
	rm.stopLoops()
	close(rm.stopCh)
	rm.wg.Wait()
	// A barrier, not a hold: the logs are flushed and checkpointed after
	// the state change in flight (which checkpointMu, taken before
	// stateChangeMu elsewhere, must not wait behind).
	if rm.lockStateChange(ctx) {
		rm.stateChangeMu.Unlock()
	} else {
		rm.logger.Warn().Msg("a state change still runs at shutdown; closing the logs anyway")
	}
	rm.partitionsMu.RLock()
	for _, h := range rm.partitions {
		h.partition.changed.notify()
	}
	rm.partitionsMu.RUnlock()
	var errs []error
	// Each step timed: with tens of thousands of logs, how long a broker
	// takes to stop is what these add up to.
	began, logs := time.Now(), len(rm.logs.Logs())
	// Flushed first: the HW checkpoint is capped at each log's recovery
	// point, and written before the flush it would restart the broker
	// with HWs below what it had (in os and interval flush modes).
	if err := rm.logs.FlushAll(); err != nil {
		errs = append(errs, err)
	}
	flushed := time.Now()
	for _, c := range rm.CheckpointHighWatermarks(ctx) {
		if c.Error != ErrNone {
			errs = append(errs, fmt.Errorf("checkpoint HWs in %s: %s", c.Dir, c.Error))
		}
	}
	checkpointed := time.Now()
	if err := rm.logs.Shutdown(); err != nil {
		errs = append(errs, err)
	}
	closed := time.Now()
	rm.logger.Info().Int("logs", logs).Dur("flush_ms", flushed.Sub(began)).Dur("checkpoint_ms", checkpointed.Sub(flushed)).
		Dur("close_ms", closed.Sub(checkpointed)).Msg("logs flushed, HWs checkpointed and logs closed")
	return errors.Join(errs...)
}

// Every storage failure reaches the log manager's Failures, the one path
// to handleLogDirFailure (Kafka's LogDirFailureChannel): the logs report
// their own (log.Options.OnStorageError), the log manager its checkpoints,
// creations and deletions.
func (rm *ReplicaManager) dirFailureLoop() {
	defer rm.wg.Done()
	failures := rm.logs.Failures()
	for {
		select {
		case <-rm.stopCh:
			return
		case f := <-failures:
			rm.handleLogDirFailure(f.Dir, f.Err)
		}
	}
}

// handleLogDirFailure takes dir offline: its partitions go offline, their
// fetchers stop, and the broker stops (Fatal) when no dir is left.
func (rm *ReplicaManager) handleLogDirFailure(dir string, cause error) {
	rm.stateChangeMu.Lock()
	defer rm.stateChangeMu.Unlock()
	// Moves into the dir end with it; moves out of it end with their partition.
	var moves []tp.TopicPartition
	for t := range rm.logs.FutureLogs() {
		if d, ok := rm.logs.FutureDirOf(t); ok && d == dir {
			moves = append(moves, t)
		}
	}
	lost := rm.logs.MarkDirOffline(dir, cause)
	rm.logger.Error().Err(cause).Str("log_dir", dir).Int("partitions", len(lost)).Msg("log dir failed; its partitions are offline")
	// A root span: the failure comes from the broker's own I/O.
	ctx, span := rm.tracer.Start(context.Background(), "ReplicaManager.handleLogDirFailure", trace.WithAttributes(
		attribute.String("replicad.log_dir", dir), attribute.Int("replicad.partitions", len(lost))))
	defer span.End()
	span.RecordError(cause)
	span.SetStatus(codes.Error, "log dir failed")
	rm.cfg.Fetchers.RemoveFetcherForPartitions(lost)
	rm.cfg.AlterLogDirsFetchers.RemoveFetcherForPartitions(append(moves, lost...))
	// A span per partition while they are few, events otherwise.
	events := newPartitionEvents(span)
	for _, t := range lost {
		if len(lost) <= MaxPartitionSpans {
			rm.markPartitionOffline(ctx, t, offlineDirFailed, nil)
			continue
		}
		if events.Want() {
			events.Add("ReplicaManager.markPartitionOffline", append(partitionAttrs(t), attribute.String("replicad.reason", string(offlineDirFailed)))...)
		}
		rm.setPartitionOffline(t, offlineDirFailed)
	}
	events.Done()
	if len(rm.onlineDirs()) == 0 {
		rm.fatalOnce.Do(func() {
			rm.fatal <- fmt.Errorf("every log dir is offline (last: %s: %v)", dir, cause)
		})
	}
}

// offlineReason says why a partition goes offline on this broker.
type offlineReason string

const (
	offlineDirFailed  offlineReason = "its log dir is offline"
	offlineNoLog      offlineReason = "its log could not be opened or created"
	offlineSwapFailed offlineReason = "a log dir move failed half way"
	offlineCorrupt    offlineReason = "corrupt batch"
)

// markPartitionOffline sets a hosted partition Offline and fails its
// waiters, in a ReplicaManager.markPartitionOffline span under ctx's with
// replicad.reason, attrs, and cause recorded when there is one.
func (rm *ReplicaManager) markPartitionOffline(ctx context.Context, t tp.TopicPartition, reason offlineReason, cause error, attrs ...attribute.KeyValue) {
	_, span := rm.tracer.Start(ctx, "ReplicaManager.markPartitionOffline", trace.WithAttributes(
		append(append(partitionAttrs(t), attribute.String("replicad.reason", string(reason))), attrs...)...))
	defer span.End()
	if cause != nil {
		span.RecordError(cause)
		span.SetStatus(codes.Error, string(reason))
	}
	rm.setPartitionOffline(t, reason)
}

// setPartitionOffline is markPartitionOffline without its span.
func (rm *ReplicaManager) setPartitionOffline(t tp.TopicPartition, reason offlineReason) {
	rm.partitionsMu.Lock()
	h, ok := rm.partitions[t]
	if !ok {
		h = &hostedPartition{partition: newPartition(t, rm.env)}
		rm.partitions[t] = h
	}
	h.offline.Store(true)
	rm.partitionsMu.Unlock()
	h.partition.mu.Lock()
	h.partition.log = nil
	h.partition.mu.Unlock()
	h.partition.stop()
	rm.stateLog.Warn().Str("topic", t.Topic).Int32("partition", t.Partition).Msg("Marked the partition offline: " + string(reason))
}

// noFetchers is the FetcherManager of a broker without replication.
type noFetchers struct{}

func (noFetchers) AddFetcherForPartitions(context.Context, map[tp.TopicPartition]InitialFetchState) {}
func (noFetchers) RemoveFetcherForPartitions([]tp.TopicPartition)                                   {}
func (noFetchers) ShutdownIdleFetchers()                                                            {}
func (noFetchers) IsFetching(tp.TopicPartition) bool                                                { return true } // nothing to add back
func (noFetchers) Shutdown()                                                                        {}

// stateChangeLogger is Kafka's stateChangeLogger: Logger's output, its own
// level when Config.StateChangeLevel is set.
func stateChangeLogger(cfg Config) zerolog.Logger {
	l := cfg.Logger.With().Str("logger", "state.change").Int32("broker", cfg.BrokerID).Logger()
	if cfg.StateChangeLevel != nil {
		l = l.Level(*cfg.StateChangeLevel)
	}
	return l
}

// lockStateChange takes stateChangeMu unless ctx ends first (it then
// reports false). A holder ends soon once BeginShutdown was called.
func (rm *ReplicaManager) lockStateChange(ctx context.Context) bool {
	for !rm.stateChangeMu.TryLock() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Millisecond):
		}
	}
	return true
}
