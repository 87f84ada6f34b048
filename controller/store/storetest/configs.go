package storetest

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/replicad/replicad/controller/store"
)

// testTopicConfigs ensures a topic's configs are stored with it at version
// 1, replaced only at the expected version (a stale writer changes nothing),
// refused for an unknown topic, and gone with the topic: a topic created
// again under the name starts over at version 1 with its own configs.
func testTopicConfigs(t *testing.T, s store.Store) {
	ctx := context.Background()
	one := []store.Partition{{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}}}
	if err := s.CreateTopic(ctx, "t", one, map[string]string{"retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTopic(ctx, "plain", one, nil); err != nil {
		t.Fatal(err)
	}
	got := must(s.TopicConfigs(ctx))(t)
	if c := got["t"]; c.Version != 1 || !maps.Equal(c.Configs, map[string]string{"retention.ms": "1000"}) {
		t.Fatalf("configs of t = %+v, want version 1 retention.ms=1000", c)
	}
	if c := got["plain"]; c.Version != 1 || len(c.Configs) != 0 {
		t.Fatalf("configs of plain = %+v, want version 1 and none", c)
	}
	next := map[string]string{"retention.bytes": "5"}
	stored := must(s.SetTopicConfig(ctx, "t", 1, next))(t)
	if stored.Version != 2 || !maps.Equal(stored.Configs, next) {
		t.Fatalf("SetTopicConfig stored %+v, want version 2 %v", stored, next)
	}
	next["retention.bytes"] = "6" // the store kept its own copy
	if _, err := s.SetTopicConfig(ctx, "t", 1, map[string]string{"segment.ms": "1"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("SetTopicConfig at a stale version: %v, want ErrConflict", err)
	}
	if c := must(s.TopicConfigs(ctx))(t)["t"]; c.Version != 2 || !maps.Equal(c.Configs, map[string]string{"retention.bytes": "5"}) {
		t.Fatalf("after a stale write: %+v, want version 2 retention.bytes=5", c)
	}
	if _, err := s.SetTopicConfig(ctx, "nope", 0, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetTopicConfig of an unknown topic: %v, want ErrNotFound", err)
	}
	if err := s.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if c, ok := must(s.TopicConfigs(ctx))(t)["t"]; ok {
		t.Fatalf("a deleted topic still has configs %+v", c)
	}
	if _, err := s.SetTopicConfig(ctx, "t", 2, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetTopicConfig of a deleted topic: %v, want ErrNotFound", err)
	}
	if err := s.CreateTopic(ctx, "t", one, map[string]string{"segment.ms": "10"}); err != nil {
		t.Fatal(err)
	}
	if c := must(s.TopicConfigs(ctx))(t)["t"]; c.Version != 1 || !maps.Equal(c.Configs, map[string]string{"segment.ms": "10"}) {
		t.Fatalf("configs of t created again = %+v, want version 1 segment.ms=10", c)
	}
}

// testTopicConfigsPersist ensures configs survive a restart.
func testTopicConfigsPersist(t *testing.T, s store.Store, restart func(store.Store) store.Store) {
	ctx := context.Background()
	one := []store.Partition{{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}}}
	if err := s.CreateTopic(ctx, "t", one, map[string]string{"retention.ms": "1000"}); err != nil {
		t.Fatal(err)
	}
	must(s.SetTopicConfig(ctx, "t", 1, map[string]string{"retention.ms": "2000", "min.insync.replicas": "2"}))(t)
	want := map[string]string{"retention.ms": "2000", "min.insync.replicas": "3"}
	if err := s.AlterTopicConfig(ctx, "t", 2, store.TopicConfig{Version: 3, Configs: want, MinIsrFloor: 2}, nil); err != nil {
		t.Fatal(err)
	}
	s = restart(s)
	if c := must(s.TopicConfigs(ctx))(t)["t"]; c.Version != 3 || !maps.Equal(c.Configs, want) || c.MinIsrFloor != 2 {
		t.Fatalf("after restart: %+v, want version 3 %v with min ISR floor 2", c, want)
	}
}

// testAlterTopicConfig ensures AlterTopicConfig writes a topic's config,
// its min ISR floor and partition states in one transaction: everything or,
// when the version or any partition epoch is stale, nothing; that a write
// at the same version changes the floor alone; that SetTopicConfig keeps the
// floor; and that a bad argument is refused.
func testAlterTopicConfig(t *testing.T, s store.Store) {
	ctx := context.Background()
	createTopic(t, s, "t", 2)
	createTopic(t, s, "u", 1)
	p0 := must(s.Partition(ctx, "t", 0))(t)
	p1 := must(s.Partition(ctx, "t", 1))(t)
	clearElr := func(p store.Partition) store.PartitionUpdate {
		next := p.Clone()
		next.ELR, next.LastKnownELR = nil, nil
		next.ISR = []int32{1}
		next.PartitionEpoch++
		return store.PartitionUpdate{Expected: p.PartitionEpoch, New: next}
	}
	raise := store.TopicConfig{Version: 2, Configs: map[string]string{"min.insync.replicas": "3"}, MinIsrFloor: 1}

	// A stale partition epoch: nothing at all is written.
	stale := clearElr(p1)
	stale.Expected, stale.New.PartitionEpoch = p1.PartitionEpoch+1, p1.PartitionEpoch+2
	if err := s.AlterTopicConfig(ctx, "t", 1, raise, []store.PartitionUpdate{clearElr(p0), stale}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("with a stale partition epoch: %v, want ErrConflict", err)
	}
	if c := must(s.TopicConfigs(ctx))(t)["t"]; c.Version != 1 || len(c.Configs) != 0 || c.MinIsrFloor != 0 {
		t.Fatalf("a refused write stored the config %+v", c)
	}
	if p := must(s.Partition(ctx, "t", 0))(t); p.PartitionEpoch != p0.PartitionEpoch {
		t.Fatalf("a refused write stored partition %+v", p)
	}
	// Refused arguments.
	for name, bad := range map[string]func() error{
		"version two ahead": func() error { return s.AlterTopicConfig(ctx, "t", 1, store.TopicConfig{Version: 3}, nil) },
		"negative floor": func() error {
			return s.AlterTopicConfig(ctx, "t", 1, store.TopicConfig{Version: 2, MinIsrFloor: -1}, nil)
		},
		"another topic": func() error {
			return s.AlterTopicConfig(ctx, "t", 1, raise, []store.PartitionUpdate{clearElr(must(s.Partition(ctx, "u", 0))(t))})
		},
		"overrides changed at the same version": func() error {
			return s.AlterTopicConfig(ctx, "t", 1, store.TopicConfig{Version: 1, Configs: raise.Configs}, nil)
		},
	} {
		if err := bad(); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if err := s.AlterTopicConfig(ctx, "nope", 0, store.TopicConfig{Version: 1}, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown topic: %v, want ErrNotFound", err)
	}

	// Everything in one write.
	if err := s.AlterTopicConfig(ctx, "t", 1, raise, []store.PartitionUpdate{clearElr(p0), clearElr(p1)}); err != nil {
		t.Fatal(err)
	}
	if c := must(s.TopicConfigs(ctx))(t)["t"]; c.Version != 2 || !maps.Equal(c.Configs, raise.Configs) || c.MinIsrFloor != 1 {
		t.Fatalf("stored config %+v, want %+v", c, raise)
	}
	for _, p := range []store.Partition{p0, p1} {
		if got := must(s.Partition(ctx, "t", p.Partition))(t); got.PartitionEpoch != p.PartitionEpoch+1 || len(got.ISR) != 1 {
			t.Fatalf("stored partition %+v, want epoch %d and ISR [1]", got, p.PartitionEpoch+1)
		}
	}
	if err := s.AlterTopicConfig(ctx, "t", 1, store.TopicConfig{Version: 2}, nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("at a stale version: %v, want ErrConflict", err)
	}
	// SetTopicConfig keeps the floor; a write at the same version clears it.
	must(s.SetTopicConfig(ctx, "t", 2, map[string]string{"min.insync.replicas": "2"}))(t)
	if c := must(s.TopicConfigs(ctx))(t)["t"]; c.Version != 3 || c.MinIsrFloor != 1 {
		t.Fatalf("after SetTopicConfig: %+v, want version 3 with the floor 1 kept", c)
	}
	if err := s.AlterTopicConfig(ctx, "t", 3, store.TopicConfig{Version: 3, Configs: map[string]string{"min.insync.replicas": "2"}}, nil); err != nil {
		t.Fatal(err)
	}
	if c := must(s.TopicConfigs(ctx))(t)["t"]; c.Version != 3 || c.MinIsrFloor != 0 || c.Configs["min.insync.replicas"] != "2" {
		t.Fatalf("after clearing the floor: %+v, want version 3, no floor", c)
	}
}
