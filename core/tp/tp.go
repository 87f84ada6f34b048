package tp

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxTopicLength is Kafka's limit on a topic name.
const MaxTopicLength = 249

var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)

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
	case !legalTopic.MatchString(name):
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
