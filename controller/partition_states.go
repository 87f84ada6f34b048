package controller

import "github.com/replicad/replicad/controller/store"

// PartitionStates returns the active controller's in-memory copy of every
// partition, sorted by topic then partition (ok false while not active).
// The simulation (tests/sim) compares it with the store once its faults
// have healed: a controller whose memory stays behind what it stored
// refuses every later change of that partition with a conflict (a wedge),
// which no broker-side check can see.
func (c *Controller) PartitionStates() (parts []store.Partition, ok bool) {
	c.lock()
	defer c.unlock()
	if !c.active {
		return nil, false
	}
	parts = c.sortedPartitionsLocked()
	for i := range parts {
		parts[i] = parts[i].Clone()
	}
	return parts, true
}
