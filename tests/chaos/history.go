package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// History is the run's record, one JSON object a line in history.jsonl:
// every produce attempt and its outcome, every fault and heal. The checker
// works from the in-memory copies the workload keeps; the file is for
// people reading a failure.
type History struct {
	mu    sync.Mutex
	f     *os.File
	enc   *json.Encoder
	start time.Time
	out   func(string) // the nemesis's lines also go here (the test log)
}

// Event is one line of the history.
type Event struct {
	T         float64 `json:"t"` // seconds since the start
	Kind      string  `json:"kind"`
	Partition int32   `json:"partition,omitempty"`
	Offset    int64   `json:"offset,omitempty"`
	Value     string  `json:"value,omitempty"`
	Error     string  `json:"error,omitempty"`
	Detail    string  `json:"detail,omitempty"`
	// The idempotent producer's ID and epoch (producer-init,
	// producer-restart and the produce outcomes of an idempotent producer).
	PID   int64 `json:"pid,omitempty"`
	Epoch int32 `json:"epoch,omitempty"`
}

// recordID names a record the workload sends, and is its value: the
// workload's producer (its number, kept across restarts), the producer's
// incarnation (0, then one more at each restart with its producer ID), and
// the record's index, one more per record the producer sends, whatever its
// partition. A value is sent once and retried as is: a value twice in a
// partition is a duplicate, and a producer's values in a partition come in
// (incarnation, index) order.
type recordID struct {
	Producer    int
	Incarnation int
	Index       int64
}

func (r recordID) String() string {
	return fmt.Sprintf("w%d.i%d.%d", r.Producer, r.Incarnation, r.Index)
}

// before orders a producer's records: a restarted producer's records come
// after its older incarnations'.
func (r recordID) before(o recordID) bool {
	if r.Incarnation != o.Incarnation {
		return r.Incarnation < o.Incarnation
	}
	return r.Index < o.Index
}

// parseValue reads a recordID back from a value; false: not a value the
// workload sends.
func parseValue(v string) (recordID, bool) {
	var r recordID
	if n, err := fmt.Sscanf(v, "w%d.i%d.%d", &r.Producer, &r.Incarnation, &r.Index); n != 3 || err != nil || r.String() != v {
		return recordID{}, false
	}
	return r, true
}

func newHistory(path string, out func(string)) (*History, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &History{f: f, enc: json.NewEncoder(f), start: time.Now(), out: out}, nil
}

func (h *History) since(t time.Time) float64 { return t.Sub(h.start).Seconds() }

func (h *History) add(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.T == 0 {
		e.T = h.since(time.Now())
	}
	_ = h.enc.Encode(e)
}

// note records a nemesis or checker line and prints it with its time.
func (h *History) note(kind, format string, args ...any) {
	detail := fmt.Sprintf(format, args...)
	t := h.since(time.Now())
	h.add(Event{T: t, Kind: kind, Detail: detail})
	if h.out != nil {
		h.out(fmt.Sprintf("%8.3fs %-10s %s", t, kind, detail))
	}
}

func (h *History) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = h.f.Close()
}
