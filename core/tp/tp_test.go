package tp

import (
	"strings"
	"testing"
)

// Legal topic names are [a-zA-Z0-9._-]{1,249}, and "." and ".." are refused.
func TestValidateTopic(t *testing.T) {
	good := []string{"orders", "a.b_c-D9", strings.Repeat("x", 249)}
	bad := []string{"", ".", "..", "has space", "slash/", "é", strings.Repeat("x", 250)}
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
