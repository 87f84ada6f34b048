package store

import (
	"context"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The replication throttle (Kafka's leader.replication.throttled.rate, one
// rate for the whole cluster here): the bytes/s a leader sends to the
// replicas a reassignment is adding, while they are outside the ISR. It is stored so that a controller that takes over, or
// restarts, keeps sending it to the brokers until `reassign --verify`
// removes it; a throttle lost at a failover would let a move run at full
// speed and slow the ISR down.

func checkThrottle(bytesPerSec int64) error {
	if bytesPerSec < 0 {
		return fmt.Errorf("replication throttle %d bytes/s is negative: %w", bytesPerSec, ErrInvalid)
	}
	return nil
}

func (m *Memory) ReplicationThrottle(ctx context.Context) (int64, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return m.throttle, nil
}

func (m *Memory) SetReplicationThrottle(ctx context.Context, bytesPerSec int64) error {
	if err := checkThrottle(bytesPerSec); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	m.throttle = bytesPerSec
	return nil
}

func (s *BoltStore) ReplicationThrottle(ctx context.Context) (int64, error) {
	var v uint64
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		v, err = getU64(tx.Bucket(bucketMeta), keyThrottle)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("replication throttle: %w", err)
	}
	return int64(v), nil
}

func (s *BoltStore) SetReplicationThrottle(ctx context.Context, bytesPerSec int64) error {
	if err := checkThrottle(bytesPerSec); err != nil {
		return err
	}
	err := s.update(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyThrottle, be64(uint64(bytesPerSec)))
	})
	if err != nil {
		return fmt.Errorf("set replication throttle: %w", err)
	}
	return nil
}

func (s *EtcdStore) ReplicationThrottle(ctx context.Context) (int64, error) {
	kv, err := s.get(ctx, s.key(etcdKeyThrottle))
	if err == nil {
		var n int64
		if n, err = parseCounter(kv, 64); err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("replication throttle: %w", err)
}

func (s *EtcdStore) SetReplicationThrottle(ctx context.Context, bytesPerSec int64) error {
	if err := checkThrottle(bytesPerSec); err != nil {
		return err
	}
	if err := s.beginWrite(ctx); err != nil {
		return fmt.Errorf("set replication throttle: %w", err)
	}
	// A blind put (no compare but the election fence): the last writer
	// wins, as an operator's last --throttle should.
	key := s.key(etcdKeyThrottle)
	if _, err := s.commit(ctx, nil, []clientv3.Op{clientv3.OpPut(key, strconv.FormatInt(bytesPerSec, 10))}); err != nil {
		return fmt.Errorf("set replication throttle: %w", err)
	}
	return nil
}
