package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Concurrent writers lose nothing, and Take empties what it returns.
func TestConcurrentWritesAndTake(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				b.WriteLine("x")
				_, _ = b.Write([]byte("y\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	got := b.Take()
	if n := strings.Count(got, "x\n"); n != 800 || strings.Count(got, "y\n") != 800 {
		t.Fatalf("%d x lines and %d y lines, want 800 each", n, strings.Count(got, "y\n"))
	}
	if b.String() != "" || b.Take() != "" {
		t.Fatal("Take did not empty the buffer")
	}
}
