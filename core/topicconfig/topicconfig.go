package topicconfig

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The keys a topic may override, with Kafka's names.
const (
	RetentionMs       = "retention.ms"
	RetentionBytes    = "retention.bytes"
	SegmentBytes      = "segment.bytes"
	SegmentMs         = "segment.ms"
	MinInsyncReplicas = "min.insync.replicas"
	CleanupPolicy     = "cleanup.policy"
)

// CleanupDelete is the only cleanup.policy replicad implements: whole
// segments are deleted by retention (compaction is not built).
const CleanupDelete = "delete"

// Limits of the values, as the broker's flags check them.
const (
	// MinSegmentBytes is the smallest segment.bytes (the broker's
	// --segment-bytes floor).
	MinSegmentBytes = 1024
	// MaxSegmentBytes is the largest: the index holds 32-bit positions.
	MaxSegmentBytes = math.MaxInt32
)

// Config is a topic's effective configuration: a broker's defaults with the
// topic's overrides applied.
type Config struct {
	// RetentionMs: segments whose newest record is older are deleted; -1 no limit.
	RetentionMs int64
	// RetentionBytes: the oldest segments are deleted while the log without
	// them still holds this many bytes; -1 no limit.
	RetentionBytes int64
	// SegmentBytes: the active segment rolls beyond this size.
	SegmentBytes int64
	// SegmentMs: the active segment rolls once its records span this long
	// (by record timestamp, as Kafka's segment.ms); 0 or less: never by time.
	SegmentMs int64
	// MinInsyncReplicas: the smallest ISR that accepts acks=all produces and
	// moves the high watermark.
	MinInsyncReplicas int
	// CleanupPolicy is CleanupDelete.
	CleanupPolicy string
}

// Error is an override refused: an unknown key or a bad value. Key names it.
type Error struct {
	Key, Value, Reason string
}

func (e *Error) Error() string {
	if e.Value == "" && strings.HasPrefix(e.Reason, "unknown") {
		return fmt.Sprintf("config %q: %s", e.Key, e.Reason)
	}
	return fmt.Sprintf("config %s=%q: %s", e.Key, e.Value, e.Reason)
}

// Keys are the keys a topic may override, sorted.
func Keys() []string {
	return []string{CleanupPolicy, MinInsyncReplicas, RetentionBytes, RetentionMs, SegmentBytes, SegmentMs}
}

// Validate checks every key and value of overrides; the first refused (in
// key order, so the answer does not change from run to run) is an *Error.
func Validate(overrides map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		if err := validateOne(k, overrides[k]); err != nil {
			return err
		}
	}
	return nil
}

// ValidateKey checks that k may be overridden (for a deletion, which has
// no value).
func ValidateKey(k string) error {
	if !slices.Contains(Keys(), k) {
		return &Error{Key: k, Reason: "unknown topic config (known: " + strings.Join(Keys(), ", ") + ")"}
	}
	return nil
}

func validateOne(k, v string) error {
	if err := ValidateKey(k); err != nil {
		return err
	}
	bad := func(reason string) error { return &Error{Key: k, Value: v, Reason: reason} }
	switch k {
	case RetentionMs, RetentionBytes:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < -1 {
			return bad("want an integer >= -1 (-1: no limit)")
		}
	case SegmentBytes:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < MinSegmentBytes || n > MaxSegmentBytes {
			return bad(fmt.Sprintf("want an integer in [%d, %d]", MinSegmentBytes, MaxSegmentBytes))
		}
	case SegmentMs:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return bad("want an integer >= 1 (ms)")
		}
	case MinInsyncReplicas:
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 {
			return bad("want an integer >= 1")
		}
	case CleanupPolicy:
		if v != CleanupDelete {
			return bad(`only "delete" is supported (compaction is not implemented)`)
		}
	}
	return nil
}

// With is c with the overrides applied. Overrides are validated first; an
// invalid one is an error and c is returned unchanged, so a broker keeps
// its defaults rather than act on a value it cannot read.
func (c Config) With(overrides map[string]string) (Config, error) {
	if err := Validate(overrides); err != nil {
		return c, err
	}
	out := c
	for k, v := range overrides {
		switch k {
		case RetentionMs:
			out.RetentionMs, _ = strconv.ParseInt(v, 10, 64)
		case RetentionBytes:
			out.RetentionBytes, _ = strconv.ParseInt(v, 10, 64)
		case SegmentBytes:
			out.SegmentBytes, _ = strconv.ParseInt(v, 10, 64)
		case SegmentMs:
			out.SegmentMs, _ = strconv.ParseInt(v, 10, 64)
		case MinInsyncReplicas:
			n, _ := strconv.ParseInt(v, 10, 32)
			out.MinInsyncReplicas = int(n)
		case CleanupPolicy:
			out.CleanupPolicy = v
		}
	}
	return out, nil
}

// Apply is overrides changed by set (keys set or replaced) and del (keys
// removed), as Kafka's IncrementalAlterConfigs SET and DELETE: a new map,
// validated. A key both set and deleted is refused.
func Apply(overrides, set map[string]string, del []string) (map[string]string, error) {
	for _, k := range del {
		if err := ValidateKey(k); err != nil {
			return nil, err
		}
		if _, ok := set[k]; ok {
			return nil, &Error{Key: k, Value: set[k], Reason: "both set and deleted"}
		}
	}
	if err := Validate(set); err != nil {
		return nil, err
	}
	out := maps.Clone(overrides)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range del {
		delete(out, k)
	}
	maps.Copy(out, set)
	return out, nil
}

// ParseAssignments reads "k=v" strings (the CLI's --config flags) into an
// override map; a malformed one or a key given twice is an error.
func ParseAssignments(kvs []string) (map[string]string, error) {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("config %q: want KEY=VALUE", kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("config %q given twice", k)
		}
		out[k] = v
	}
	return out, nil
}

// Value is the string value of k in c (describe-config's effective value).
func (c Config) Value(k string) string {
	switch k {
	case RetentionMs:
		return strconv.FormatInt(c.RetentionMs, 10)
	case RetentionBytes:
		return strconv.FormatInt(c.RetentionBytes, 10)
	case SegmentBytes:
		return strconv.FormatInt(c.SegmentBytes, 10)
	case SegmentMs:
		return strconv.FormatInt(c.SegmentMs, 10)
	case MinInsyncReplicas:
		return strconv.Itoa(c.MinInsyncReplicas)
	case CleanupPolicy:
		return c.CleanupPolicy
	}
	return ""
}

// Format is overrides as "k=v,k=v" sorted by key (for logs and spans);
// "" for none.
func Format(overrides map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + overrides[k])
	}
	return b.String()
}

// Defaults are the defaults of replicad's broker flags for the topic
// configs, Kafka's but for 256 MiB segments (Kafka's are 1 GiB): 7 days of
// retention, no size limit, a roll after 7 days (log.roll.hours 168),
// min.insync.replicas 1, delete.
func Defaults() Config {
	return Config{RetentionMs: 7 * 24 * 3600 * 1000, RetentionBytes: -1, SegmentBytes: 256 << 20, SegmentMs: 7 * 24 * 3600 * 1000,
		MinInsyncReplicas: 1, CleanupPolicy: CleanupDelete}
}
