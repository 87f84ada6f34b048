// Package storetest is the test suite every store.Store implementation must
// pass. An implementation runs it from its own _test.go file:
//
//	func TestMemory(t *testing.T) {
//		storetest.RunSuite(t, func(t *testing.T) store.Store { return store.NewMemory() })
//	}
//
// RunSuite checks the contract shared by all stores (epochs, compare-and-set,
// all-or-nothing updates, concurrency). RunDurabilitySuite checks, for a
// store that survives a restart, that what was committed is still there
// after Close and a new open, and that no epoch is reused.
//
// The suite never sleeps: concurrent tests release their goroutines together
// through a closed channel and wait for them with a WaitGroup.
package storetest
