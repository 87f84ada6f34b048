package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Producer IDs (issue 21). The store keeps one counter, the last ID of the
// last block handed out, and the newest epoch handed out per bumped ID. Both
// change only by a read-modify-write inside one transaction (bbolt) or a
// compare-and-set on the key's mod revision (etcd), so that the answer a
// caller gets is the one the store recorded: a block or an epoch is handed
// out only by a call that returned nil, and a call that failed (whatever
// its outcome) hands out nothing, so a later call cannot give the same IDs
// or epoch to someone else.

// nextProducerBlock validates AllocateProducerIDs' count against the
// stored last ID and returns the new last ID.
func nextProducerBlock(last int64, count int32) (int64, error) {
	if count <= 0 {
		return 0, fmt.Errorf("count %d is not positive: %w", count, ErrInvalid)
	}
	if last > math.MaxInt64-int64(count) {
		return 0, fmt.Errorf("the last id %d leaves no block of %d: %w", last, count, ErrInvalid)
	}
	return last + int64(count), nil
}

// checkProducerBump decides BumpProducerEpoch for an ID whose newest epoch
// is stored (0 if never bumped), last being LastProducerID.
func checkProducerBump(id int64, from int16, last int64, stored int16) (int16, error) {
	if id < 1 || id > last {
		return 0, fmt.Errorf("producer id %d was never issued (last issued %d): %w", id, last, ErrNotFound)
	}
	if from < 0 {
		return 0, fmt.Errorf("producer id %d: epoch %d is negative: %w", id, from, ErrInvalid)
	}
	if from != stored {
		return 0, fmt.Errorf("producer id %d: epoch %d is not the newest handed out, %d: %w", id, from, stored, ErrConflict)
	}
	if from == math.MaxInt16 {
		return 0, fmt.Errorf("producer id %d: epoch %d is the largest; a new producer id is needed: %w", id, from, ErrInvalid)
	}
	return from + 1, nil
}

func (m *Memory) AllocateProducerIDs(ctx context.Context, count int32) (int64, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	next, err := nextProducerBlock(m.lastProducerID, count)
	if err != nil {
		return 0, fmt.Errorf("allocate producer ids: %w", err)
	}
	first := m.lastProducerID + 1
	m.lastProducerID = next
	return first, nil
}

func (m *Memory) LastProducerID(ctx context.Context) (int64, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return m.lastProducerID, nil
}

func (m *Memory) BumpProducerEpoch(ctx context.Context, id int64, from int16) (int16, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	next, err := checkProducerBump(id, from, m.lastProducerID, m.producerEpochs[id])
	if err != nil {
		return 0, fmt.Errorf("bump producer epoch: %w", err)
	}
	if m.producerEpochs == nil {
		m.producerEpochs = make(map[int64]int16)
	}
	m.producerEpochs[id] = next
	return next, nil
}

func (s *BoltStore) AllocateProducerIDs(ctx context.Context, count int32) (int64, error) {
	var first int64
	err := s.update(ctx, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		last, err := getU64(meta, keyLastProducerID)
		if err != nil {
			return err
		}
		next, err := nextProducerBlock(int64(last), count)
		if err != nil {
			return err
		}
		first = int64(last) + 1
		return meta.Put(keyLastProducerID, be64(uint64(next)))
	})
	if err != nil {
		return 0, fmt.Errorf("allocate producer ids: %w", err)
	}
	return first, nil
}

func (s *BoltStore) LastProducerID(ctx context.Context) (int64, error) {
	var last uint64
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		last, err = getU64(tx.Bucket(bucketMeta), keyLastProducerID)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("last producer id: %w", err)
	}
	return int64(last), nil
}

func (s *BoltStore) BumpProducerEpoch(ctx context.Context, id int64, from int16) (int16, error) {
	var next int16
	err := s.update(ctx, func(tx *bolt.Tx) error {
		last, err := getU64(tx.Bucket(bucketMeta), keyLastProducerID)
		if err != nil {
			return err
		}
		epochs := tx.Bucket(bucketEpochs)
		key := be64(uint64(id))
		var stored int16
		switch v := epochs.Get(key); len(v) {
		case 0:
		case 2:
			stored = int16(binary.BigEndian.Uint16(v))
		default:
			return fmt.Errorf("producer_epochs %d: %d bytes, want 2", id, len(v))
		}
		if next, err = checkProducerBump(id, from, int64(last), stored); err != nil {
			return err
		}
		return epochs.Put(key, binary.BigEndian.AppendUint16(nil, uint16(next)))
	})
	if err != nil {
		return 0, fmt.Errorf("bump producer epoch: %w", err)
	}
	return next, nil
}

func (s *EtcdStore) producerEpochKey(id int64) string {
	return s.prefix + etcdDirProducerEpochs + strconv.FormatInt(id, 10)
}

func (s *EtcdStore) AllocateProducerIDs(ctx context.Context, count int32) (int64, error) {
	if _, err := nextProducerBlock(0, count); err != nil {
		return 0, fmt.Errorf("allocate producer ids: %w", err)
	}
	if err := s.beginWrite(ctx); err != nil {
		return 0, fmt.Errorf("allocate producer ids: %w", err)
	}
	counter := s.key(etcdKeyLastProducerID)
	for {
		kv, err := s.get(ctx, counter)
		if err != nil {
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		last, err := parseCounter(kv, 64)
		if err != nil {
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		next, err := nextProducerBlock(last, count)
		if err != nil {
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		// The counter's compare makes the block unique: a concurrent
		// allocation that moved it fails this one, which reads again; an
		// attempt that landed unseen is told apart by commit's write id.
		ok, err := s.commit(ctx, []clientv3.Cmp{modRevIs(counter, kv)}, []clientv3.Op{
			clientv3.OpPut(counter, strconv.FormatInt(next, 10)),
		})
		if err != nil {
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		if ok {
			return last + 1, nil
		}
	}
}

func (s *EtcdStore) LastProducerID(ctx context.Context) (int64, error) {
	kv, err := s.get(ctx, s.key(etcdKeyLastProducerID))
	if err == nil {
		var n int64
		if n, err = parseCounter(kv, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("last producer id: %w", err)
}

func (s *EtcdStore) BumpProducerEpoch(ctx context.Context, id int64, from int16) (int16, error) {
	if err := s.beginWrite(ctx); err != nil {
		return 0, fmt.Errorf("bump producer epoch: %w", err)
	}
	key := s.producerEpochKey(id)
	for {
		// The counter only grows: an ID it covers stays covered, so only
		// the epoch's key needs a compare.
		last, err := s.LastProducerID(ctx)
		if err != nil {
			return 0, fmt.Errorf("bump producer epoch: %w", err)
		}
		kv, err := s.get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("bump producer epoch: %w", err)
		}
		stored, err := parseCounter(kv, 16)
		if err != nil {
			return 0, fmt.Errorf("bump producer epoch: %w", err)
		}
		next, err := checkProducerBump(id, from, last, int16(stored))
		if err != nil {
			return 0, fmt.Errorf("bump producer epoch: %w", err)
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{modRevIs(key, kv)}, []clientv3.Op{
			clientv3.OpPut(key, strconv.FormatInt(int64(next), 10)),
		})
		if err != nil {
			return 0, fmt.Errorf("bump producer epoch: %w", err)
		}
		if ok {
			return next, nil
		}
	}
}
