package core

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
)

// CheckpointHighWatermarks writes every online log dir's
// replication-offset-checkpoint (Kafka's checkpointHighWatermarks). Each file
// holds the HW of every log open in that dir: the hosted partitions, and also
// logs kept after a StopReplica without delete, so that their HW survives a
// restart. A dir whose write fails goes offline. The call is traced (the RPC
// and shutdown checkpoints); the periodic one is not, see
// periodicHighWatermarkCheckpoint.
func (rm *ReplicaManager) CheckpointHighWatermarks(ctx context.Context) []DirCheckpoint {
	_, span := rm.tracer.Start(ctx, "ReplicaManager.checkpointHighWatermarks")
	defer span.End()
	out := rm.checkpointHighWatermarks()
	failed := 0
	for _, d := range out {
		if d.Error != ErrNone {
			failed++
		}
	}
	span.SetAttributes(attribute.Int("replicad.log_dirs", len(out)), attribute.Int("replicad.failed_log_dirs", failed))
	if failed > 0 {
		span.SetStatus(codes.Error, "a log dir failed")
	}
	return out
}

// periodicHighWatermarkCheckpoint is the checkpoint every
// --hw-checkpoint-interval. It makes no span: a sampled root trace every few
// seconds from every broker would bury the state changes users open Jaeger
// for. A dir that fails is traced all the same, as the log dir failure it
// becomes (ReplicaManager.handleLogDirFailure), and the duration is in
// replicad_hw_checkpoint_duration_seconds.
func (rm *ReplicaManager) periodicHighWatermarkCheckpoint() { rm.checkpointHighWatermarks() }

func (rm *ReplicaManager) checkpointHighWatermarks() []DirCheckpoint {
	rm.checkpointMu.Lock()
	defer rm.checkpointMu.Unlock()
	start := time.Now()
	out := rm.writeHighWatermarkCheckpoints()
	rm.cfg.Metrics.HighWatermarkCheckpointed(time.Since(start))
	rm.logger.Debug().Dur("took_ms", time.Since(start)).Int("log_dirs", len(out)).Msg("checkpointed high watermarks")
	return out
}

// writeHighWatermarkCheckpoints writes one replication-offset-checkpoint per
// online dir; a dir whose write fails goes offline. The log manager reads
// the HWs and writes them under one lock, which its log deletions take too
// (they rewrite the file without the deleted log's entry).
func (rm *ReplicaManager) writeHighWatermarkCheckpoints() []DirCheckpoint {
	var out []DirCheckpoint
	for _, c := range rm.logs.CheckpointHighWatermarks(rm.onlineDirs()) {
		res := DirCheckpoint{Dir: c.Dir, Partitions: len(c.HWs)}
		if err := c.Err; err != nil {
			rm.logger.Error().Err(err).Str("log_dir", c.Dir).Msg("write the HW checkpoint")
			res.Error = ErrStorageError
			// The log manager reports the failure too; it is handled here
			// at once, so the caller sees the dir offline when answered.
			// Running out of descriptors is no failure of the dir.
			if !errors.Is(err, log.ErrFileLimit) {
				rm.handleLogDirFailure(c.Dir, err)
			}
		}
		out = append(out, res)
	}
	return out
}

// startHighWatermarkCheckpointLoop starts, once, the periodic work that
// follows the first LeaderAndIsr: the HW checkpoint, the recovery-point and
// log-start checkpoints, the interval flush, and the ISR shrink check every
// replica-lag-time-max / 2 (so a lagging follower leaves the ISR between one
// and one and a half lag times after it last caught up).
func (rm *ReplicaManager) startHighWatermarkCheckpointLoop() {
	rm.hwCheckpointing.Do(func() {
		rm.every(rm.cfg.ReplicaLagTimeMax/2, rm.maybeShrinkIsr)
		rm.everyArmed(rm.cfg.RetentionCheckInterval, rm.applyRetention, func(next time.Time) {
			rm.nextRetentionCheckMs.Store(next.UnixMilli())
		})
		rm.every(rm.cfg.HWCheckpointInterval, func() {
			rm.periodicHighWatermarkCheckpoint()
			rm.logs.CheckpointLogOffsets() // a dir that fails is reported by the log manager
		})
		if rm.cfg.LogConfig.FlushPolicy == log.FlushInterval && rm.cfg.LogConfig.FlushInterval > 0 {
			rm.every(rm.cfg.LogConfig.FlushInterval, func() {
				if err := rm.logs.FlushAll(); err != nil {
					rm.logger.Error().Err(err).Msg("interval flush")
				}
			})
		}
	})
}

// every runs fn every d on the configured clock until Shutdown. Runs never
// overlap: the next one is armed when the previous one returns.
func (rm *ReplicaManager) every(d time.Duration, fn func()) { rm.everyArmed(d, fn, nil) }

// everyArmed is every, telling armed (when not nil) when each next run is
// due, as it is armed.
func (rm *ReplicaManager) everyArmed(d time.Duration, fn func(), armed func(next time.Time)) {
	var arm func()
	arm = func() {
		rm.loopsMu.Lock()
		defer rm.loopsMu.Unlock()
		if rm.loopsStopped {
			return
		}
		if armed != nil {
			armed(rm.cfg.Clock.Now().Add(d))
		}
		var t clock.Timer
		t = rm.cfg.Clock.AfterFunc(d, func() {
			rm.loopsMu.Lock()
			delete(rm.loopTimers, t)
			if rm.loopsStopped {
				rm.loopsMu.Unlock()
				return
			}
			rm.loopsRunning.Add(1)
			rm.loopsMu.Unlock()
			fn()
			rm.loopsRunning.Done()
			arm()
		})
		rm.loopTimers[t] = struct{}{}
	}
	arm()
}

// stopLoops cancels the periodic work and waits for a run in progress.
func (rm *ReplicaManager) stopLoops() {
	rm.loopsMu.Lock()
	rm.loopsStopped = true
	for t := range rm.loopTimers {
		t.Stop()
	}
	rm.loopTimers = nil
	rm.loopsMu.Unlock()
	rm.loopsRunning.Wait()
}
