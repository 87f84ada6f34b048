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
