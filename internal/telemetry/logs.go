package telemetry

import (
	"time"

	"github.com/rs/zerolog"
)

// The log conventions of the daemons: every line stamped in UTC to the
// millisecond, every duration in ms with the unit in its key (took_ms,
// backoff_ms: zerolog's Dur writes milliseconds), and every error code by
// its Kafka name (ErrorCodeName: FENCED_LEADER_EPOCH, never the enum's
// ERROR_CODE_FENCED_LEADER_EPOCH).

// LogTimeFormat is the timestamp of every log line: RFC 3339 to the
// millisecond.
const LogTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// LogTimestamps stamps each event with the time, in UTC, to the
// millisecond. zerolog's own Timestamp() uses a process-wide format
// (seconds by default) that a package should not change under others.
var LogTimestamps = zerolog.HookFunc(func(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, time.Now().UTC().Format(LogTimeFormat))
})
