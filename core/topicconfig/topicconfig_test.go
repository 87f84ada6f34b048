package topicconfig

import (
	"errors"
	"maps"
	"testing"
)

func TestValidateNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		m   map[string]string
		key string
	}{
		{map[string]string{"retention.mss": "1"}, "retention.mss"},
		{map[string]string{"retention.ms": "x"}, "retention.ms"},
		{map[string]string{"retention.bytes": "-2"}, "retention.bytes"},
		{map[string]string{"segment.bytes": "1023"}, "segment.bytes"},
		{map[string]string{"segment.bytes": "2147483648"}, "segment.bytes"},
		{map[string]string{"segment.ms": "0"}, "segment.ms"},
		{map[string]string{"min.insync.replicas": "0"}, "min.insync.replicas"},
		{map[string]string{"cleanup.policy": "compact"}, "cleanup.policy"},
		// Several bad keys: the first in key order, so the answer is stable.
		{map[string]string{"segment.ms": "0", "min.insync.replicas": "0"}, "min.insync.replicas"},
	} {
		var e *Error
		if err := Validate(tc.m); !errors.As(err, &e) || e.Key != tc.key {
			t.Errorf("Validate(%v) = %v, want an error naming %s", tc.m, err, tc.key)
		}
	}
	ok := map[string]string{"retention.ms": "-1", "retention.bytes": "0", "segment.bytes": "1024", "segment.ms": "1",
		"min.insync.replicas": "3", "cleanup.policy": "delete"}
	if err := Validate(ok); err != nil {
		t.Fatalf("Validate(%v) = %v", ok, err)
	}
}

func TestWithAppliesOverridesOverDefaults(t *testing.T) {
	d := Defaults()
	c, err := d.With(map[string]string{"retention.ms": "1000", "min.insync.replicas": "2"})
	if err != nil || c.RetentionMs != 1000 || c.MinInsyncReplicas != 2 || c.SegmentBytes != d.SegmentBytes || c.RetentionBytes != -1 {
		t.Fatalf("With: %+v %v", c, err)
	}
	if got, err := d.With(map[string]string{"retention.ms": "soon"}); err == nil || got != d {
		t.Fatalf("With a bad value: %+v %v, want the defaults unchanged and an error", got, err)
	}
	for _, k := range Keys() {
		if c.Value(k) == "" {
			t.Errorf("Value(%s) is empty", k)
		}
	}
}

func TestApplySetsAndDeletes(t *testing.T) {
	cur := map[string]string{"retention.ms": "1", "segment.ms": "2"}
	next, err := Apply(cur, map[string]string{"retention.bytes": "3"}, []string{"segment.ms"})
	if err != nil || !maps.Equal(next, map[string]string{"retention.ms": "1", "retention.bytes": "3"}) {
		t.Fatalf("Apply: %v %v", next, err)
	}
	if cur["segment.ms"] != "2" {
		t.Fatal("Apply changed its argument")
	}
	if _, err := Apply(cur, map[string]string{"segment.ms": "5"}, []string{"segment.ms"}); err == nil {
		t.Fatal("a key both set and deleted was accepted")
	}
	if _, err := Apply(cur, nil, []string{"nope"}); err == nil {
		t.Fatal("deleting an unknown key was accepted")
	}
}

func TestParseAssignments(t *testing.T) {
	m, err := ParseAssignments([]string{"retention.ms=1", "cleanup.policy=delete"})
	if err != nil || len(m) != 2 || m["retention.ms"] != "1" {
		t.Fatalf("ParseAssignments: %v %v", m, err)
	}
	for _, bad := range [][]string{{"retention.ms"}, {"=1"}, {"a=1", "a=2"}} {
		if _, err := ParseAssignments(bad); err == nil {
			t.Errorf("ParseAssignments(%v) accepted", bad)
		}
	}
	if got := Format(map[string]string{"b": "2", "a": "1"}); got != "a=1,b=2" {
		t.Fatalf("Format = %q", got)
	}
}
