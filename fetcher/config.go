package fetcher

import (
	"errors"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/replicad/replicad/core/clock"
)

// Config configures a Manager and its fetchers. Zero durations and sizes take
// the defaults below (Kafka's replica.fetch.* defaults where they exist).
type Config struct {
	BrokerID int32 // replica_id of every fetch
	// BrokerEpoch returns this broker's current epoch, read at every fetch
	// request (its broker_epoch, for STALE_BROKER_EPOCH fencing): a broker
	// that re-registers with the controller gets a new one. Nil means 0 (no
	// controller).
	BrokerEpoch func() int64
	NumFetchers int // fetchers per leader (--num-replica-fetchers); default 1

	MaxWait  time.Duration // max_wait_ms: how long the leader may hold a fetch; default 500ms
	MaxBytes int32         // max_bytes of a fetch; default 10 MiB
	// DisableFetchSessions makes every request list every partition, as
	// before fetch sessions (KIP-227); tests use it to check that both
	// ways fetch alike.
	DisableFetchSessions bool

	// PartitionBackoff delays a partition after a retriable error (leader not
	// ready for its epoch yet, corrupt batch) before it is fetched again.
	PartitionBackoff time.Duration // default 1s (replica.fetch.backoff.ms)
	// ReconnectBackoff and MaxReconnectBackoff bound the exponential delay
	// between attempts to reopen a broken stream; ReconnectJitter in [0, 1]
	// is the share of each delay randomised. The 1 s bound is Kafka's
	// replica.fetch.backoff.ms and reconnect.backoff.max.ms: a follower is
	// back within about a second of its leader (GRPCClient's channel
	// reconnects within grpcx.ReconnectMaxDelay too).
	ReconnectBackoff    time.Duration // default 100ms
	MaxReconnectBackoff time.Duration // default 1s
	ReconnectJitter     float64       // default 0.2; negative means none

	Client   LeaderClient   // required
	Replicas Replicas       // required
	Clock    clock.Clock    // default clock.Real
	Rand     func() float64 // jitter source in [0, 1); default math/rand/v2
	Logger   zerolog.Logger
	// Tracer makes the fetchers' spans (Log.truncate,
	// ReplicaFetcher.openStream); default: none recorded.
	Tracer trace.Tracer
}

func (c Config) withDefaults() (Config, error) {
	if c.Client == nil || c.Replicas == nil {
		return c, errors.New("fetcher: config needs a Client and Replicas")
	}
	if c.BrokerEpoch == nil {
		c.BrokerEpoch = func() int64 { return 0 }
	}
	if c.NumFetchers <= 0 {
		c.NumFetchers = 1
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 500 * time.Millisecond
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 10 << 20
	}
	if c.PartitionBackoff <= 0 {
		c.PartitionBackoff = time.Second
	}
	if c.ReconnectBackoff <= 0 {
		c.ReconnectBackoff = 100 * time.Millisecond
	}
	if c.MaxReconnectBackoff <= 0 {
		c.MaxReconnectBackoff = time.Second
	}
	c.MaxReconnectBackoff = max(c.MaxReconnectBackoff, c.ReconnectBackoff)
	switch {
	case c.ReconnectJitter == 0:
		c.ReconnectJitter = 0.2
	case c.ReconnectJitter < 0:
		c.ReconnectJitter = 0
	case c.ReconnectJitter > 1:
		c.ReconnectJitter = 1
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Rand == nil {
		c.Rand = defaultRand
	}
	if c.Tracer == nil {
		c.Tracer = noop.NewTracerProvider().Tracer("")
	}
	return c, nil
}
