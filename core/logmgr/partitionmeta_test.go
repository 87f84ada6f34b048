package logmgr

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

const topicIDA = "vXbx7Hc8TC2-LWVSwTLY7g"
const topicIDB = "AQIDBAUGBwgJCgsMDQ4PEA"

// A log created for a topic ID keeps it in partition.metadata (Kafka's
// format) across a restart; a log without one takes the first ID it is
// given, and refuses another.
func TestPartitionMetadataKeepsTheTopicID(t *testing.T) {
	dirs := tempDirs(t, 1)
	m := open(t, dirs...)
	a, b := tpOf("a", 0), tpOf("b", 0)
	if _, err := m.GetOrCreateLogOfTopic(a, topicIDA, true); err != nil {
		t.Fatal(err)
	}
	create(t, m, b)
	if got := readFile(t, filepath.Join(dirs[0], "a-0", PartitionMetadataFile)); got != "version: 0\ntopic_id: "+topicIDA+"\n" {
		t.Fatalf("partition.metadata = %q", got)
	}
	if m.TopicID(b) != "" {
		t.Fatalf("a log created without a topic ID has %q", m.TopicID(b))
	}
	if err := m.SetTopicID(b, topicIDB); err != nil {
		t.Fatal(err)
	}
	if err := m.SetTopicID(b, topicIDA); !errors.Is(err, ErrInconsistentTopicID) {
		t.Fatalf("SetTopicID to another ID: %v, want ErrInconsistentTopicID", err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	m = open(t, dirs...)
	if m.TopicID(a) != topicIDA || m.TopicID(b) != topicIDB {
		t.Fatalf("after a restart: topic IDs %q %q, want %q %q", m.TopicID(a), m.TopicID(b), topicIDA, topicIDB)
	}
}

// A partition.metadata that does not parse leaves its log with an ID no
// topic has, so it is never taken for any topic's.
func TestMalformedPartitionMetadataMatchesNoTopic(t *testing.T) {
	dirs := tempDirs(t, 1)
	m := open(t, dirs...)
	if _, err := m.GetOrCreateLogOfTopic(tpOf("a", 0), topicIDA, true); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirs[0], "a-0", PartitionMetadataFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	m = open(t, dirs...)
	if id := m.TopicID(tpOf("a", 0)); id == "" || id == topicIDA {
		t.Fatalf("topic ID of a log with a malformed partition.metadata: %q", id)
	}
}

// A log given its topic ID while it is being moved keeps it through the
// swap and a restart: the future log's partition.metadata is written too.
// Lost, the log would be taken for any topic's of its name.
func TestTopicIDSetDuringAMoveSurvivesIt(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	p := tpOf("t", 0)
	copiedToFuture(t, m, dirs, p) // created without a topic ID
	if err := m.SetTopicID(p, topicIDA); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReplaceCurrentWithFutureLog(p, 5); err != nil {
		t.Fatal(err)
	}
	if got := m.TopicID(p); got != topicIDA {
		t.Fatalf("after the swap: topic ID %q, want %s", got, topicIDA)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	m = open(t, dirs...)
	if got := m.TopicID(p); got != topicIDA {
		t.Fatalf("after a restart: topic ID %q, want %s", got, topicIDA)
	}
	if err := m.SetTopicID(p, topicIDB); !errors.Is(err, ErrInconsistentTopicID) {
		t.Fatalf("another topic's ID accepted after the move: %v", err)
	}
}
