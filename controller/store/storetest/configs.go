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
	s = restart(s)
	want := map[string]string{"retention.ms": "2000", "min.insync.replicas": "2"}
	if c := must(s.TopicConfigs(ctx))(t)["t"]; c.Version != 2 || !maps.Equal(c.Configs, want) {
		t.Fatalf("after restart: %+v, want version 2 %v", c, want)
	}
}
