package fetcher

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/replicad/replicad/core/clock"
)

// backoff is an exponential delay with jitter between attempts to reopen a
// broken stream, so that the followers of a restarted leader do not all
// reconnect in the same instant.
type backoff struct {
	initial, max time.Duration
	jitter       float64        // fraction of the delay randomised, in [0, 1]
	rand         func() float64 // in [0, 1); injectable for tests
	attempt      int
}

// next returns the delay before the next attempt and counts the attempt.
func (b *backoff) next() time.Duration {
	d := b.initial
	for i := 0; i < b.attempt && d < b.max; i++ {
		d *= 2
	}
	d = min(d, b.max)
	b.attempt++
	if b.jitter > 0 {
		// Spread over [d*(1-jitter), d].
		d -= time.Duration(b.jitter * b.rand() * float64(d))
	}
	return d
}

// reset is called once a stream answered: the next failure starts over.
func (b *backoff) reset() { b.attempt = 0 }

func defaultRand() float64 { return rand.Float64() }

// sleep waits d on clk, or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	done := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(done) })
	select {
	case <-done:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}
