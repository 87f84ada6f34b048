package grpcx

import "testing"

// The pool hands out buffers of the length asked, with at least the
// capacity of their tier, and keeps none over 1 MiB.
func TestTieredPool(t *testing.T) {
	p := newTieredPool()
	for _, n := range []int{0, 1, 1000, 4096, 4097, 100 << 10, 1 << 20, 1<<20 + 1, 50 << 20} {
		b := p.Get(n)
		if len(*b) != n {
			t.Fatalf("Get(%d): length %d", n, len(*b))
		}
		p.Put(b)
		again := p.Get(n)
		if len(*again) != n || cap(*again) < n {
			t.Fatalf("Get(%d) after a Put: length %d, capacity %d", n, len(*again), cap(*again))
		}
	}
	// A buffer of an odd capacity goes to the tier it covers, and a Get of
	// that tier's size still fits.
	odd := make([]byte, 10, 6000)
	p.Put(&odd)
	for range 3 {
		if b := p.Get(4096); cap(*b) < 4096 {
			t.Fatalf("a 4 KiB Get got capacity %d", cap(*b))
		}
	}
	if tier, ok := tierFor(1<<20 + 1); ok {
		t.Fatalf("a buffer over 1 MiB is kept (tier %d)", tier)
	}
}
