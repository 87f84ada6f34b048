package tp

import (
	"strconv"
	"strings"
	"testing"
)

// Legal topic names are [a-zA-Z0-9._-]{1,249}, and "." and ".." are refused.
func TestValidateTopic(t *testing.T) {
	good := []string{"orders", "a.b_c-D9", strings.Repeat("x", 249)}
	bad := []string{"", ".", "..", "has space", "slash/", "é", strings.Repeat("x", 250), "nul\x00", "a+b", "at@", "br[", "co:", "gr`", "cu{", "/"}
	for _, n := range good {
		if err := ValidateTopic(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	for _, n := range bad {
		if err := ValidateTopic(n); err == nil {
			t.Errorf("%q accepted", n)
		}
	}
}

// Partition dir names round-trip, with the number after the last '-'.
func TestParseDirName(t *testing.T) {
	for _, tp := range []TopicPartition{{"orders", 0}, {"my-topic", 12}, {"a-1", 3}} {
		got, err := ParseDirName(tp.String())
		if err != nil || got != tp {
			t.Errorf("%v: got %v %v", tp, got, err)
		}
	}
	for _, n := range []string{"orders", "orders-", "-1", "orders-x", "orders-0.5-future"} {
		if _, err := ParseDirName(n); err == nil {
			t.Errorf("%q parsed", n)
		}
	}
}

func TestValidateTopicID(t *testing.T) {
	for id, ok := range map[string]bool{
		"":                         true,
		"vXbx7Hc8TC2-LWVSwTLY7g":   true,
		"AAAAAAAAAAAAAAAAAAAAAA":   false, // zero
		"vXbx7Hc8TC2-LWVSwTLY7g==": false, // padded
		"vXbx7Hc8TC2+LWVSwTLY7g":   false, // not URL-safe
		"short":                    false,
	} {
		if err := ValidateTopicID(id); (err == nil) != ok {
			t.Errorf("ValidateTopicID(%q) = %v, want ok=%v", id, err, ok)
		}
	}
}

// Dir names must fit Linux's 255 bytes: "topic-partition" is checked, and a
// deleted log's name is Kafka's with the topic cut short (KAFKA-4893).
func TestDirNameLimits(t *testing.T) {
	long := strings.Repeat("x", MaxTopicLength)
	if err := ValidateDirName(TopicPartition{long, 99999}); err != nil {
		t.Errorf("255-byte name refused: %v", err)
	}
	if err := ValidateDirName(TopicPartition{long, 100000}); err == nil {
		t.Error("256-byte name accepted")
	}
	if err := ValidateFutureDirName(TopicPartition{strings.Repeat("x", 213), 0}); err != nil {
		t.Errorf("215-byte partition name refused a future dir: %v", err)
	}
	if err := ValidateFutureDirName(TopicPartition{strings.Repeat("x", 214), 0}); err == nil {
		t.Error("future dir over 255 bytes accepted")
	}
	id := strings.Repeat("a", 32)
	for _, p := range []TopicPartition{{long, 0}, {long, 1<<31 - 1}, {"short", 3}} {
		n := DeleteDirName(p, id, "-delete")
		tail := "-" + strconv.Itoa(int(p.Partition)) + "." + id + "-delete"
		if len(n) > MaxDirNameLength || !strings.HasSuffix(n, tail) || !strings.HasPrefix(p.Topic, strings.TrimSuffix(n, tail)) {
			t.Errorf("DeleteDirName(%v) = %q (%d bytes)", p, n, len(n))
		}
	}
	if got := DeleteDirName(TopicPartition{"short", 3}, id, "-delete"); got != "short-3."+id+"-delete" {
		t.Errorf("short name changed: %q", got)
	}
	for topic, want := range map[string]int64{long: 100000, strings.Repeat("x", 254): 0, strings.Repeat("x", 253): 10, "a": 1<<31 - 1} {
		if got := MaxPartitionsFor(topic); got != want {
			t.Errorf("MaxPartitionsFor(%d chars) = %d, want %d", len(topic), got, want)
		}
	}
}

func TestJoinIDs(t *testing.T) {
	for _, tc := range []struct {
		ids        []int32
		join, list string
	}{
		{nil, "", "none"},
		{[]int32{3}, "3", "3"},
		{[]int32{1, 2, 3}, "1,2,3", "1,2,3"},
	} {
		if got := JoinIDs(tc.ids); got != tc.join {
			t.Errorf("JoinIDs(%v) = %q, want %q", tc.ids, got, tc.join)
		}
		if got := IDList(tc.ids); got != tc.list {
			t.Errorf("IDList(%v) = %q, want %q", tc.ids, got, tc.list)
		}
	}
}
