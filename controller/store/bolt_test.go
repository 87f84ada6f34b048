package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// TestBoltRefusesSecondOpener ensures a second opener of a store in use (a second controller on the same dir) fails instead of sharing it, and succeeds once the first closes.
func TestBoltRefusesSecondOpener(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Waits boltLockTimeout (1s) for the lock: bbolt's flock is per open
	// file, so it conflicts within one process too.
	if s2, err := OpenBolt(dir); !errors.Is(err, berrors.ErrTimeout) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second open: %v, want a lock timeout", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenBolt(dir)
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	s.Close()
}

// TestBoltCreatesFileInDir ensures OpenBolt creates missing directories and keeps its data in DIR/controller.db.
func TestBoltCreatesFileInDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	s, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, BoltFile)); err != nil {
		t.Fatalf("store file: %v", err)
	}
}

// TestBoltRefusesOtherSchema ensures a file written with another schema version is refused, not misread.
func TestBoltRefusesOtherSchema(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, BoltFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return meta.Put(keySchemaVersion, be32(boltSchemaVersion+1))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if s, err := OpenBolt(dir); err == nil {
		s.Close()
		t.Fatal("opened a store with another schema version")
	}
}

// TestBoltCorruptRecordIsAnError ensures an undecodable partition record fails the read rather than returning a zero partition.
func TestBoltCorruptRecordIsAnError(t *testing.T) {
	s, err := OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateTopic(ctx, "t", []Partition{{Partition: 0, Replicas: []int32{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bolt.Tx) error {
		return topicBucket(tx, "t").Put(be32(0), []byte("{not json"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Partition(ctx, "t", 0); err == nil {
		t.Fatal("read a corrupt partition without error")
	}
	if _, err := s.Partitions(ctx); err == nil {
		t.Fatal("listed a corrupt partition without error")
	}
	u := PartitionUpdate{Expected: 0, New: Partition{Topic: "t", Partition: 0, PartitionEpoch: 1}}
	if err := s.UpdatePartitions(ctx, []PartitionUpdate{u}); err == nil || errors.Is(err, ErrConflict) {
		t.Fatalf("update over a corrupt partition: %v, want a decode error", err)
	}
}
