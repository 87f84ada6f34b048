package controller

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// The replication throttle (Kafka's leader.replication.throttled.rate with
// the moving replicas throttled, as kafka-reassign-partitions lists them): a
// leader sends the replicas a reassignment is adding (the partition state's
// AddingReplicas), while they are outside the ISR, at most this many
// bytes/s, so they catch up without slowing the ISR; other followers outside
// the ISR (one back from a restart) are not held back. The controller keeps one rate for the cluster in the store
// (so a failover keeps it) and stamps it on every UpdateMetadata
// (brokerqueue.Config.Throttle), as it does the ACLs; `reassign --execute
// --throttle` sets it and `reassign --verify` removes it once every move is
// done.

// wireThrottle is the throttle as UpdateMetadata carries it.
type wireThrottle struct {
	bytesPerSec int64
	version     int64
}

// setThrottleLocked makes bytesPerSec the rate sent from now on, under a new
// version: a broker that has it ignores an older one of this controller
// epoch (a slow attempt overtaken by its retry).
func (c *Controller) setThrottleLocked(bytesPerSec int64) {
	c.throttle = bytesPerSec
	c.throttleVersions++
	c.wireThrottle.Store(&wireThrottle{bytesPerSec: bytesPerSec, version: c.throttleVersions})
}

// currentWireThrottle is what each UpdateMetadata carries; it takes no lock
// (it runs under a broker queue's).
func (c *Controller) currentWireThrottle() (int64, int64) {
	if w := c.wireThrottle.Load(); w != nil {
		return w.bytesPerSec, w.version
	}
	return 0, 0
}

// loadThrottleLocked reads the stored throttle at activation, before any
// queue opens.
func (c *Controller) loadThrottleLocked(ctx context.Context) error {
	rate, err := c.cfg.Store.ReplicationThrottle(ctx)
	if err != nil {
		return err
	}
	c.setThrottleLocked(rate)
	return nil
}

// alterReplicationThrottle stores the throttle, tells every live broker and
// waits (SendTimeout at most) until they have it. It returns the rate in
// force before.
func (c *Controller) alterReplicationThrottle(ctx context.Context, bytesPerSec int64) (int64, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.alterReplicationThrottle", trace.WithAttributes(
		attribute.Int64("replicad.throttle_bytes_per_sec", bytesPerSec)))
	defer span.End()
	c.lock()
	if !c.active {
		c.unlock()
		return 0, errNotController
	}
	previous := c.throttle
	sctx, cancel := c.storeCtx(ctx)
	err := c.cfg.Store.SetReplicationThrottle(sctx, bytesPerSec)
	cancel()
	if err != nil {
		err = c.writeFailedLocked(ctx, "replication throttle change not stored", err)
		c.unlock()
		return previous, err
	}
	c.setThrottleLocked(bytesPerSec)
	var touched []int32
	live := c.liveBrokersLocked()
	for _, id := range c.sortedBrokerIDsLocked() {
		if bs := c.brokers[id]; bs.reachable() {
			bs.queue.UpdateMetadataContext(ctx, live, nil)
			touched = append(touched, id)
		}
	}
	c.unlock()
	span.SetAttributes(attribute.Int64("replicad.previous_throttle_bytes_per_sec", previous),
		attribute.Int("replicad.brokers_told", len(touched)))
	c.log.Info().Int64("bytes_per_sec", bytesPerSec).Int64("previous_bytes_per_sec", previous).
		Int("brokers_told", len(touched)).Msg("replication throttle changed")
	c.waitDelivered(ctx, touched)
	return previous, nil
}
