package tp

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// MaxTopicLength is Kafka's limit on a topic name.
const MaxTopicLength = 249

// legalTopic reports whether name is made of [a-zA-Z0-9._-] only. It is a
// loop, not a regexp: every fetch checks each of its partitions' names, and
// the regexp was 1.4% of a leader's CPU.
func legalTopic(name string) bool {
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// TopicPartition identifies one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String renders the partition as Kafka does in directory names: "topic-3".
func (t TopicPartition) String() string {
	return t.Topic + "-" + strconv.FormatInt(int64(t.Partition), 10)
}

// ValidateTopic returns an error saying why name is not a legal topic name.
func ValidateTopic(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic is empty")
	case len(name) > MaxTopicLength:
		return fmt.Errorf("topic is %d characters, longer than %d", len(name), MaxTopicLength)
	case name == "." || name == "..":
		return fmt.Errorf("topic %q is not allowed", name)
	case !legalTopic(name):
		return fmt.Errorf("topic %q has characters outside [a-zA-Z0-9._-]", name)
	}
	return nil
}

// ValidateTopicID returns an error saying why id is not a topic ID in
// Kafka's text form (16 bytes, URL-safe base64 without padding, not all
// zero). The empty string, an unknown ID, is valid.
func ValidateTopicID(id string) error {
	if id == "" {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(id)
	switch {
	case err != nil || len(b) != 16:
		return fmt.Errorf("topic ID %q is not 16 bytes of URL-safe base64 without padding", id)
	case [16]byte(b) == [16]byte{}:
		return fmt.Errorf("topic ID %q is the zero ID", id)
	}
	return nil
}

// ParseDirName parses a partition directory name "topic-3" back into a
// TopicPartition. The partition number follows the last '-'.
func ParseDirName(name string) (TopicPartition, error) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return TopicPartition{}, fmt.Errorf("partition dir %q: want topic-partition", name)
	}
	p, err := strconv.ParseInt(name[i+1:], 10, 32)
	if err != nil || p < 0 {
		return TopicPartition{}, fmt.Errorf("partition dir %q: bad partition number", name)
	}
	topic := name[:i]
	if err := ValidateTopic(topic); err != nil {
		return TopicPartition{}, fmt.Errorf("partition dir %q: %w", name, err)
	}
	return TopicPartition{Topic: topic, Partition: int32(p)}, nil
}

// Less orders partitions by topic, then partition number.
func Less(a, b TopicPartition) bool {
	if a.Topic != b.Topic {
		return a.Topic < b.Topic
	}
	return a.Partition < b.Partition
}

// MaxDirNameLength is the longest file name Linux takes (NAME_MAX, in bytes).
// A partition's dir is named "topic-partition", so a legal topic with a large
// partition number (249 characters at partition 100000) may not fit: such a
// partition cannot be hosted, and requests naming one are refused before they
// reach a disk (where ENAMETOOLONG would look like a failed dir).
const MaxDirNameLength = 255

// uniqueIDLength is the length of the unique ID in "-delete" and "-future"
// dir names (a UUID's 32 hex digits, as Kafka writes it).
const uniqueIDLength = 32

// futureDirExtra is what a future dir adds to the partition's dir name:
// "." + unique ID + "-future".
const futureDirExtra = 1 + uniqueIDLength + len("-future")

// ValidateDirName returns an error when t's dir name is longer than
// MaxDirNameLength.
func ValidateDirName(t TopicPartition) error {
	if n := len(t.String()); n > MaxDirNameLength {
		return fmt.Errorf("partition %d of a %d-character topic needs a %d-byte dir name %q..., over the %d-byte limit",
			t.Partition, len(t.Topic), n, t.String()[:16], MaxDirNameLength)
	}
	return nil
}

// ValidateFutureDirName returns an error when t's future dir (alter log
// dirs' "topic-partition.<id>-future", which start-up parses back to the
// partition, so it cannot be truncated) is longer than MaxDirNameLength.
func ValidateFutureDirName(t TopicPartition) error {
	if n := len(t.String()) + futureDirExtra; n > MaxDirNameLength {
		return fmt.Errorf("moving partition %d of a %d-character topic needs a %d-byte future dir name, over the %d-byte limit (moves need topic-partition names of at most %d bytes)",
			t.Partition, len(t.Topic), n, MaxDirNameLength, MaxDirNameLength-futureDirExtra)
	}
	return nil
}

// MaxPartitionsFor is the most partitions a topic of this name can have
// with every partition's dir name fitting MaxDirNameLength (0 when none
// fits; math.MaxInt32 when every partition number fits).
func MaxPartitionsFor(topic string) int64 {
	room := MaxDirNameLength - len(topic) - 1 // digits left for the partition number
	switch {
	case room <= 0:
		return 0
	case room >= 10:
		return 1<<31 - 1
	}
	n := int64(1)
	for range room {
		n *= 10
	}
	return n // partitions 0..n-1 have at most room digits
}

// DeleteDirName names the dir a deleted log is renamed to, as Kafka does
// (KAFKA-4893, LocalLog.logDeleteDirName): "topic-partition.<id>-delete"
// with the topic cut short so the whole fits MaxDirNameLength. Nothing
// parses it back: start-up removes every "-delete" dir.
func DeleteDirName(t TopicPartition, uniqueID, suffix string) string {
	tail := "-" + strconv.FormatInt(int64(t.Partition), 10) + "." + uniqueID + suffix
	n := min(len(t.Topic), max(0, MaxDirNameLength-len(tail)))
	return t.Topic[:n] + tail
}

// JoinIDs writes broker IDs (a replica set, an ISR) as operators read them
// and Kafka's tools print them, "1,2,3", never Go's [1 2 3]; "" for none.
// The controller's and brokers' messages, the client's and ctlclient's
// output all use it, so a list reads the same wherever it is shown.
func JoinIDs(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

// IDList is JoinIDs in prose: "none" for no IDs.
func IDList(ids []int32) string {
	if len(ids) == 0 {
		return "none"
	}
	return JoinIDs(ids)
}
