package log

import (
	"fmt"
	"math"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// FlushPolicy says when appended data is fsynced.
type FlushPolicy int

const (
	// FlushEveryBatch fsyncs before an append returns; concurrent appenders
	// share one fsync (group commit).
	FlushEveryBatch FlushPolicy = iota
	// FlushInterval leaves fsync to the owner, who calls Flush periodically.
	FlushInterval
	// FlushOS never fsyncs appends; the OS writes back (Kafka's default):
	// durability comes from replication. Segments are still fsynced on roll and close.
	FlushOS
)

// Config is the per-log configuration. A zero field takes DefaultConfig's value.
type Config struct {
	SegmentBytes int64 // roll the active segment beyond this size; at most 2 GiB - 1
	// SegmentMs rolls the active segment when a batch is more than this
	// many ms newer (by record timestamp) than its first batch (Kafka's
	// segment.ms / log.roll.ms); 0: never by time.
	SegmentMs          int64
	IndexIntervalBytes int // bytes between sparse index entries
	MaxBatchBytes      int // reject batches larger than this
	FlushPolicy        FlushPolicy
	FlushInterval      time.Duration // for FlushInterval, used by the owner
	// TruncateDamaged: a batch that recovery finds damaged below the
	// recovery point (damage at rest, not a torn write) is cut off with
	// everything after it, as Kafka does. Off, the log opens damaged
	// instead (see Damaged), keeping the records after the damage on disk
	// until a leader's copy replaces them.
	TruncateDamaged bool
	// MaxOpenFiles is the broker's, not one log's: the log manager opens
	// the segment and index files of all its logs through one FileCache
	// of this many descriptors (replicad's --max-open-files). 0: no bound.
	// Open ignores it; Options.FileCache is what a log uses.
	MaxOpenFiles int
	// ProducerIDExpirationMs: a producer whose last batch's max timestamp
	// is this many ms old is forgotten at the owner's next check (Kafka's
	// producer.id.expiration.ms); its next batch must start at sequence 0.
	// 0: DefaultProducerIDExpirationMs; negative: never.
	ProducerIDExpirationMs int64
	// MaxProducers bounds the producers held per log; past it the ones
	// whose last batch is oldest go (see producerstate). 0:
	// DefaultMaxProducers; negative: no bound.
	MaxProducers int
}

// DefaultProducerIDExpirationMs is Kafka's producer.id.expiration.ms: a day.
const DefaultProducerIDExpirationMs = 86_400_000

// DefaultMaxProducers bounds a log's producers: about 2 MiB of state at
// ~200 bytes a producer (BenchmarkIdleProducerMemory), and far more
// producers writing one partition within a day than a Kafka deployment
// sees; a producer evicted past it gets UNKNOWN_PRODUCER_ID and
// re-initialises, losing no data.
const DefaultMaxProducers = 10_000

// DefaultConfig is the configuration replicad starts with.
func DefaultConfig() Config {
	return Config{SegmentBytes: 256 << 20, IndexIntervalBytes: 4096, MaxBatchBytes: 1 << 20, FlushPolicy: FlushEveryBatch, FlushInterval: time.Second}
}

// withDefaults fills zero fields and rejects impossible values.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.SegmentBytes == 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = d.MaxBatchBytes
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = d.FlushInterval
	}
	if c.ProducerIDExpirationMs == 0 {
		c.ProducerIDExpirationMs = DefaultProducerIDExpirationMs
	}
	if c.MaxProducers == 0 {
		c.MaxProducers = DefaultMaxProducers
	}
	switch {
	case c.SegmentBytes < 0 || c.SegmentBytes > math.MaxInt32:
		// Index entries hold file positions as uint32; Kafka's segment.bytes is an int too.
		return c, fmt.Errorf("log: segment bytes %d outside [1, %d]", c.SegmentBytes, math.MaxInt32)
	case c.IndexIntervalBytes < 0:
		return c, fmt.Errorf("log: negative index interval bytes %d", c.IndexIntervalBytes)
	case c.MaxBatchBytes < 0 || c.MaxBatchBytes > record.MaxBatchSize:
		return c, fmt.Errorf("log: max batch bytes %d outside [1, %d]", c.MaxBatchBytes, record.MaxBatchSize)
	case c.FlushPolicy < FlushEveryBatch || c.FlushPolicy > FlushOS:
		return c, fmt.Errorf("log: unknown flush policy %d", c.FlushPolicy)
	}
	return c, nil
}

// Options open a log.
type Options struct {
	Dir            string // the partition directory, <logdir>/<topic>-<partition>
	TopicPartition tp.TopicPartition
	Config         Config
	RecoveryPoint  int64 // segments past this are scanned on open
	LogStartOffset int64
	// SyncMetadata false: new files and dirs are not fsynced one by one;
	// the owner syncs the whole file system once (used when thousands of
	// partitions are created by one LeaderAndIsr).
	SyncMetadata bool
	Logger       zerolog.Logger
	// FS is the file system the log is on; nil means vfs.OS.
	FS vfs.FS
	// FileCache, when set, opens the log's segment and index files, and
	// closes them while idle to keep the broker within its descriptor
	// budget (see FileCache); it is shared by the logs of a broker. nil:
	// every file stays open until its segment goes.
	FileCache *FileCache
	// OnStorageError, when set, hears the log's first I/O failure after it
	// opened (a write, an fsync, a truncation, a roll, a checkpoint, a read
	// that failed on the disk), once: the owner takes the log dir offline
	// (Kafka's LogDirFailureChannel). It may be called with the log's
	// locks held: it must not call the log.
	OnStorageError func(error)
	// OnRecoveryPointLowered, when set, makes the log's recovery point and
	// log start durable in the owner's checkpoints (they are read from
	// RecoveryPoint and LogStartOffset). A truncation calls it after it
	// lowered the recovery point and before it cuts anything, and a full
	// truncation before it returns; a failure fails the truncation. nil
	// promises the checkpoint holds no recovery point above the log's, or
	// will before anything is appended (an owner still opening its logs
	// rewrites stale checkpoints itself). It is called with the log's locks
	// held: it must not call the log but for those two.
	OnRecoveryPointLowered func() error
	// OnProducerStateRebuilt, when set, hears every rebuild of the
	// producer state after a truncation (not at Open). It is called with
	// the log's locks held: it must not call the log.
	OnProducerStateRebuilt func(ProducerRebuild)
}
