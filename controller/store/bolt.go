package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// BoltFile is the name of the database file under the --store directory.
const BoltFile = "controller.db"

// boltSchemaVersion is the layout described below. OpenBolt refuses a file
// with another version rather than misread it.
const boltSchemaVersion = 1

// boltLockTimeout bounds how long OpenBolt waits for the file lock that
// another process (say, a second controller on the same --store DIR) holds.
const boltLockTimeout = time.Second

// The file layout (schema version 1). Integers in keys and in meta values
// are big-endian, so that keys sort in numeric order. Records are JSON (the
// Broker and Partition struct tags): a few hundred bytes each, readable with
// `bbolt get`, and fields can be added without a migration. Writes are rare
// (a registration, a failover), so the encoding's cost does not matter next
// to the fsync of each commit.
//
//	meta/
//	  schema_version     uint32  boltSchemaVersion
//	  controller_epoch   uint32  last epoch returned by BumpControllerEpoch (absent: 0)
//	  last_broker_epoch  uint64  last epoch assigned by RegisterBroker (absent: 0)
//	brokers/
//	  <id uint32>        JSON Broker
//	topics/
//	  <name>/            one bucket per topic
//	    <partition uint32>  JSON Partition
//	deleted/
//	  <topic id>         JSON DeletedTopic: replicas that have not deleted their logs yet
//	acls/
//	  <resource type NUL pattern type NUL name NUL principal NUL operation>  JSON ACL
//	                     (a bucket added to schema 1 without a migration: OpenBolt
//	                     creates it, empty, in an older file)
//	topic_configs/
//	  <name>             JSON TopicConfig (added to schema 1 as acls/ was; a topic
//	                     stored before it has none: version 0, no overrides)
//	producer_epochs/
//	  <producer id uint64>  uint16: the newest epoch BumpProducerEpoch handed
//	                     out for the ID (added to schema 1 as acls/ was; an ID
//	                     never bumped has none: epoch 0)
//
// and in meta/ (also added to schema 1): last_producer_id, uint64, the end
// of the last block of producer IDs AllocateProducerIDs handed out (absent:
// none yet).
var (
	bucketMeta    = []byte("meta")
	bucketBrokers = []byte("brokers")
	bucketTopics  = []byte("topics")
	bucketDeleted = []byte("deleted")
	bucketACLs    = []byte("acls")
	bucketConfigs = []byte("topic_configs")
	bucketEpochs  = []byte("producer_epochs")

	keySchemaVersion   = []byte("schema_version")
	keyControllerEpoch = []byte("controller_epoch")
	keyLastBrokerEpoch = []byte("last_broker_epoch")
	keyThrottle        = []byte("replication_throttle") // uint64 bytes/s (absent: 0)
	keyLastProducerID  = []byte("last_producer_id")
)

// BoltStore is the embedded Store: one bbolt file, DIR/controller.db. Each
// write is one bbolt read-write transaction, fsynced when it commits (bbolt's
// default), so a method that returned nil has reached the disk. bbolt runs
// one writer at a time, which is what makes the compare-and-sets atomic.
type BoltStore struct {
	dir string
	db  *bolt.DB
}

var _ Store = (*BoltStore)(nil)

// OpenBolt opens (creating it if needed) the store in dir. It fails if
// another process holds the store open.
func OpenBolt(dir string) (*BoltStore, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	path := filepath.Join(dir, BoltFile)
	opts := *bolt.DefaultOptions
	opts.Timeout = boltLockTimeout
	db, err := bolt.Open(path, 0o600, &opts)
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open store %s: locked by another process (another controller?): %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		switch v := meta.Get(keySchemaVersion); {
		case v == nil:
			if err := meta.Put(keySchemaVersion, be32(boltSchemaVersion)); err != nil {
				return err
			}
		case len(v) != 4 || binary.BigEndian.Uint32(v) != boltSchemaVersion:
			return fmt.Errorf("schema version %x, want %d", v, boltSchemaVersion)
		}
		for _, name := range [][]byte{bucketBrokers, bucketTopics, bucketDeleted, bucketACLs, bucketConfigs, bucketEpochs} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &BoltStore{dir: dir, db: db}, nil
}

// Dir returns the directory the store was opened in.
func (s *BoltStore) Dir() string { return s.dir }

// view and update run fn in a read-only or read-write transaction, after
// checking ctx. bbolt's "database not open" becomes ErrClosed.
func (s *BoltStore) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return boltErr(s.db.View(fn))
}

func (s *BoltStore) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return boltErr(s.db.Update(fn))
}

func boltErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

func (s *BoltStore) BumpControllerEpoch(ctx context.Context, past int32) (int32, error) {
	var epoch int32
	err := s.update(ctx, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		old, err := getU32(meta, keyControllerEpoch)
		if err != nil {
			return err
		}
		if epoch, err = nextControllerEpoch(int64(old), past); err != nil {
			return err
		}
		return meta.Put(keyControllerEpoch, be32(uint32(epoch)))
	})
	if err != nil {
		return 0, fmt.Errorf("bump controller epoch: %w", err)
	}
	return epoch, nil
}

func (s *BoltStore) ControllerEpoch(ctx context.Context) (int32, error) {
	var epoch uint32
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		epoch, err = getU32(tx.Bucket(bucketMeta), keyControllerEpoch)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("controller epoch: %w", err)
	}
	return int32(epoch), nil
}

func (s *BoltStore) RegisterBroker(ctx context.Context, b Broker) (Broker, error) {
	if err := checkBroker(b); err != nil {
		return Broker{}, err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		last, err := getU64(meta, keyLastBrokerEpoch)
		if err != nil {
			return err
		}
		b.Epoch = int64(last) + 1
		b.Fenced = false
		if err := meta.Put(keyLastBrokerEpoch, be64(uint64(b.Epoch))); err != nil {
			return err
		}
		return putJSON(tx.Bucket(bucketBrokers), be32(uint32(b.ID)), b)
	})
	if err != nil {
		return Broker{}, fmt.Errorf("register broker %d: %w", b.ID, err)
	}
	return b, nil
}

func (s *BoltStore) Brokers(ctx context.Context) ([]Broker, error) {
	var out []Broker
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBrokers).ForEach(func(k, v []byte) error {
			var b Broker
			if err := json.Unmarshal(v, &b); err != nil {
				return fmt.Errorf("decode broker %x: %w", k, err)
			}
			out = append(out, b)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("brokers: %w", err)
	}
	return out, nil // sorted: keys are big-endian ids
}

func (s *BoltStore) UpdateBroker(ctx context.Context, b Broker) error {
	if err := checkBroker(b); err != nil {
		return err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		brokers := tx.Bucket(bucketBrokers)
		key := be32(uint32(b.ID))
		v := brokers.Get(key)
		if v == nil {
			return ErrNotFound
		}
		var old Broker
		if err := json.Unmarshal(v, &old); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		if old.Epoch != b.Epoch {
			return fmt.Errorf("expected broker epoch %d, stored %d: %w", b.Epoch, old.Epoch, ErrConflict)
		}
		return putJSON(brokers, key, b)
	})
	if err != nil {
		return fmt.Errorf("update broker %d: %w", b.ID, err)
	}
	return nil
}

func (s *BoltStore) CreateTopic(ctx context.Context, name string, parts []Partition, configs map[string]string) error {
	t, err := newTopic(name, parts)
	if err != nil {
		return err
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		tb, err := tx.Bucket(bucketTopics).CreateBucket([]byte(name))
		if errors.Is(err, berrors.ErrBucketExists) {
			return ErrExists
		}
		if err != nil {
			return err
		}
		for _, p := range t.Partitions {
			if err := putJSON(tb, be32(uint32(p.Partition)), p); err != nil {
				return err
			}
		}
		return putJSON(tx.Bucket(bucketConfigs), []byte(name), TopicConfig{Version: 1, Configs: configs})
	})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	return nil
}

func (s *BoltStore) CreatePartitions(ctx context.Context, name string, existing int32, parts []Partition) error {
	add, err := newPartitions(name, existing, parts)
	if err != nil {
		return err
	}
	// One bbolt transaction: every new partition or none.
	err = s.update(ctx, func(tx *bolt.Tx) error {
		tb := topicBucket(tx, name)
		if tb == nil {
			return ErrNotFound
		}
		stored, err := appendPartitions(nil, name, tb)
		if err != nil {
			return err
		}
		if len(stored) == 0 {
			return fmt.Errorf("topic %s has no partitions stored: %w", name, ErrInvalid)
		}
		if err := checkNewPartitions(name, stored, existing, add); err != nil {
			return err
		}
		for _, p := range add {
			if err := putJSON(tb, be32(uint32(p.Partition)), p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create partitions of %s: %w", name, err)
	}
	return nil
}

func (s *BoltStore) TopicConfigs(ctx context.Context) (map[string]TopicConfig, error) {
	out := map[string]TopicConfig{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketConfigs).ForEach(func(k, v []byte) error {
			var c TopicConfig
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("decode config of topic %s: %w", k, err)
			}
			out[string(k)] = c
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("topic configs: %w", err)
	}
	return out, nil
}

func (s *BoltStore) SetTopicConfig(ctx context.Context, name string, expected int64, configs map[string]string) (TopicConfig, error) {
	next := TopicConfig{Version: expected + 1, Configs: maps.Clone(configs)}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if topicBucket(tx, name) == nil {
			return ErrNotFound
		}
		cur, err := getTopicConfig(tx, name)
		if err != nil {
			return err
		}
		if cur.Version != expected {
			return fmt.Errorf("version %d, expected %d: %w", cur.Version, expected, ErrConflict)
		}
		next.MinIsrFloor = cur.MinIsrFloor
		return putJSON(tx.Bucket(bucketConfigs), []byte(name), next)
	})
	if err != nil {
		return TopicConfig{}, fmt.Errorf("set topic config %s: %w", name, err)
	}
	return next, nil
}

// getTopicConfig is the stored config of a topic (version 0 and none when
// absent: a topic stored before topic configs).
func getTopicConfig(tx *bolt.Tx, name string) (TopicConfig, error) {
	var cur TopicConfig
	if v := tx.Bucket(bucketConfigs).Get([]byte(name)); v != nil {
		if err := json.Unmarshal(v, &cur); err != nil {
			return TopicConfig{}, fmt.Errorf("decode config: %w", err)
		}
	}
	return cur, nil
}

func (s *BoltStore) AlterTopicConfig(ctx context.Context, name string, expected int64, next TopicConfig, updates []PartitionUpdate) error {
	if err := checkAlterTopicConfig(name, expected, next, updates); err != nil {
		return err
	}
	// Any error returned from fn rolls the whole transaction back.
	return s.update(ctx, func(tx *bolt.Tx) error {
		if topicBucket(tx, name) == nil {
			return fmt.Errorf("alter topic config %s: %w", name, ErrNotFound)
		}
		cur, err := getTopicConfig(tx, name)
		if err != nil {
			return fmt.Errorf("alter topic config %s: %w", name, err)
		}
		if err := checkConfigVersion(name, cur, expected, next); err != nil {
			return err
		}
		if err := putJSON(tx.Bucket(bucketConfigs), []byte(name), next); err != nil {
			return fmt.Errorf("alter topic config %s: %w", name, err)
		}
		return putPartitionUpdates(tx, updates)
	})
}

func (s *BoltStore) DeleteTopic(ctx context.Context, name string) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		tb := topicBucket(tx, name)
		if tb == nil {
			return ErrNotFound
		}
		parts, err := appendPartitions(nil, name, tb)
		if err != nil {
			return err
		}
		if d, ok := NewDeletedTopic(Topic{Name: name, Partitions: parts}); ok {
			if err := putJSON(tx.Bucket(bucketDeleted), []byte(d.ID), d); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketConfigs).Delete([]byte(name)); err != nil {
			return err
		}
		return tx.Bucket(bucketTopics).DeleteBucket([]byte(name))
	})
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	return nil
}

func (s *BoltStore) DeletedTopics(ctx context.Context) ([]DeletedTopic, error) {
	var out []DeletedTopic
	err := s.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDeleted).ForEach(func(k, v []byte) error {
			var d DeletedTopic
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("decode deleted topic %s: %w", k, err)
			}
			out = append(out, d)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("deleted topics: %w", err)
	}
	sortDeleted(out)
	return out, nil
}

func (s *BoltStore) CompleteDeletions(ctx context.Context, topicID string, done []Replica) error {
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketDeleted)
		v := b.Get([]byte(topicID))
		if v == nil {
			return nil
		}
		var d DeletedTopic
		if err := json.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		next, left := completeDeletions(d, done)
		if !left {
			return b.Delete([]byte(topicID))
		}
		return putJSON(b, []byte(topicID), next)
	})
	if err != nil {
		return fmt.Errorf("complete deletions of topic %s: %w", topicID, err)
	}
	return nil
}

func (s *BoltStore) Topic(ctx context.Context, name string) (Topic, error) {
	t := Topic{Name: name}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		tb := topicBucket(tx, name)
		if tb == nil {
			return ErrNotFound
		}
		var err error
		t.Partitions, err = appendPartitions(nil, name, tb)
		return err
	})
	if err != nil {
		return Topic{}, fmt.Errorf("topic %s: %w", name, err)
	}
	return t, nil
}

func (s *BoltStore) Partitions(ctx context.Context) ([]Partition, error) {
	var out []Partition
	err := s.view(ctx, func(tx *bolt.Tx) error {
		topics := tx.Bucket(bucketTopics)
		// Bucket names sort as strings, partition keys numerically: the
		// result comes out sorted by topic then partition.
		return topics.ForEachBucket(func(name []byte) error {
			var err error
			out, err = appendPartitions(out, string(name), topics.Bucket(name))
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("partitions: %w", err)
	}
	return out, nil
}

func (s *BoltStore) Partition(ctx context.Context, topic string, partition int32) (Partition, error) {
	var p Partition
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		p, err = getPartition(tx, topic, partition)
		return err
	})
	if err != nil {
		return Partition{}, err
	}
	return p, nil
}

func (s *BoltStore) UpdatePartitions(ctx context.Context, updates []PartitionUpdate) error {
	if err := checkUpdates(updates); err != nil {
		return err
	}
	if len(updates) == 0 {
		return nil
	}
	// Any error returned from fn rolls the whole transaction back: all or
	// nothing.
	return s.update(ctx, func(tx *bolt.Tx) error {
		return putPartitionUpdates(tx, updates)
	})
}

func (s *BoltStore) Acls(ctx context.Context) ([]ACL, error) {
	var out []ACL
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		out, err = readACLs(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("acls: %w", err)
	}
	return out, nil // sorted: the keys are ACL.key()
}

func (s *BoltStore) CreateAcls(ctx context.Context, acls []ACL) ([]ACL, error) {
	if err := checkACLs(acls); err != nil {
		return nil, err
	}
	var created []ACL
	err := s.update(ctx, func(tx *bolt.Tx) error {
		stored, err := readACLs(tx)
		if err != nil {
			return err
		}
		_, created = mergeACLs(stored, acls)
		for _, a := range created {
			if err := putJSON(tx.Bucket(bucketACLs), []byte(a.key()), a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("create acls: %w", err)
	}
	return created, nil
}

func (s *BoltStore) DeleteAcls(ctx context.Context, filters []ACLFilter) ([]ACL, error) {
	var deleted []ACL
	err := s.update(ctx, func(tx *bolt.Tx) error {
		stored, err := readACLs(tx)
		if err != nil {
			return err
		}
		_, deleted = removeACLs(stored, filters)
		for _, a := range deleted {
			if err := tx.Bucket(bucketACLs).Delete([]byte(a.key())); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("delete acls: %w", err)
	}
	return deleted, nil
}

func readACLs(tx *bolt.Tx) ([]ACL, error) {
	var out []ACL
	err := tx.Bucket(bucketACLs).ForEach(func(k, v []byte) error {
		var a ACL
		if err := json.Unmarshal(v, &a); err != nil {
			return fmt.Errorf("decode acl %q: %w", k, err)
		}
		out = append(out, a)
		return nil
	})
	return out, err
}

// Close closes the database file. Later calls fail with ErrClosed.
func (s *BoltStore) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

func topicBucket(tx *bolt.Tx, name string) *bolt.Bucket {
	if name == "" {
		return nil // bbolt has no bucket with an empty name
	}
	return tx.Bucket(bucketTopics).Bucket([]byte(name))
}

func getPartition(tx *bolt.Tx, topic string, partition int32) (Partition, error) {
	tb := topicBucket(tx, topic)
	if tb == nil || partition < 0 {
		return Partition{}, partitionNotFound(topic, partition)
	}
	v := tb.Get(be32(uint32(partition)))
	if v == nil {
		return Partition{}, partitionNotFound(topic, partition)
	}
	var p Partition
	if err := json.Unmarshal(v, &p); err != nil {
		return Partition{}, fmt.Errorf("decode partition %s-%d: %w", topic, partition, err)
	}
	return p, nil
}

func appendPartitions(out []Partition, topic string, tb *bolt.Bucket) ([]Partition, error) {
	err := tb.ForEach(func(k, v []byte) error {
		var p Partition
		if err := json.Unmarshal(v, &p); err != nil {
			return fmt.Errorf("decode partition %s %x: %w", topic, k, err)
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

func getU32(b *bolt.Bucket, key []byte) (uint32, error) {
	v := b.Get(key)
	switch len(v) {
	case 0:
		return 0, nil
	case 4:
		return binary.BigEndian.Uint32(v), nil
	}
	return 0, fmt.Errorf("meta %s: %d bytes, want 4", key, len(v))
}

func getU64(b *bolt.Bucket, key []byte) (uint64, error) {
	v := b.Get(key)
	switch len(v) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(v), nil
	}
	return 0, fmt.Errorf("meta %s: %d bytes, want 8", key, len(v))
}

func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// putPartitionUpdates writes each update by compare-and-set on its partition
// epoch, inside tx: a conflict rolls the whole transaction back.
func putPartitionUpdates(tx *bolt.Tx, updates []PartitionUpdate) error {
	for _, u := range updates {
		old, err := getPartition(tx, u.New.Topic, u.New.Partition)
		if err != nil {
			return err
		}
		if old.PartitionEpoch != u.Expected {
			return conflict(u.New, u.Expected, old.PartitionEpoch)
		}
		if err := putJSON(topicBucket(tx, u.New.Topic), be32(uint32(u.New.Partition)), u.New); err != nil {
			return fmt.Errorf("update %s-%d: %w", u.New.Topic, u.New.Partition, err)
		}
	}
	return nil
}
