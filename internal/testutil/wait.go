package testutil

import (
	"testing"
	"time"
)

// Eventually retries cond until it returns nil or timeout passes, then fails
// the test with cond's last error. It polls a condition with a deadline;
// it never sleeps and hopes.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}
