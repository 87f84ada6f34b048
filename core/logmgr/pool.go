package logmgr

import (
	"sync"
	"sync/atomic"
)

// runParallel calls fn(i) for every i in [0, n) on at most workers
// goroutines. Once fn returns false no further i is started.
func runParallel(n, workers int, fn func(i int) bool) {
	workers = max(1, min(workers, n))
	var next atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if !fn(i) {
					stop.Store(true)
				}
			}
		})
	}
	wg.Wait()
}

// workers is the parallelism for IO over the logs of all online dirs.
func (m *Manager) workers(dirs int) int {
	return m.cfg.RecoveryThreadsPerDir * max(1, dirs)
}
