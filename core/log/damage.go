package log

import (
	"errors"
	"fmt"
	"slices"
)

// ErrDamaged: the log opened damaged (see Damaged) and takes no appends
// until RepairDamage (or a truncation) cuts the damage off.
var ErrDamaged = errors.New("log: damaged below its recovery point")

// Damage is where recovery found a log damaged at rest: a batch below the
// recovery point that fails its CRC, is cut short, or does not continue
// the offsets, or segments below it that do not meet. Every byte below the
// recovery point was fsynced, and a power loss only tears what was not
// (core/crashtest checks it), so such damage is the disk's or someone's
// doing, not a crash's.
type Damage struct {
	// Offset is where the sound part of the log ends: the log serves
	// [LogStartOffset, Offset) and its LEO is Offset (or the log start,
	// when the damage is below it).
	Offset int64
	// RecoveryPoint is the recovery point the log was opened with: the
	// records up to it were durable, and the ones past Offset are still
	// on disk.
	RecoveryPoint int64
	// Cause says what is wrong at Offset.
	Cause error

	seg      *segment // the segment holding the damage
	position int64    // where in seg the sound part ends
}

// Damaged returns the damage the log opened with, until it is repaired.
//
// Kafka's recovery truncates at the first bad batch it reads, and so drops
// the intact, committed batches after it. A damaged log instead keeps every
// byte, and serves what comes before the damage, so that its owner decides:
// a follower calls RepairDamage and fetches the rest from its leader; a
// replica asked to lead refuses, and another replica, which has the
// records, leads. Until then the log takes no appends (ErrDamaged), and
// its recovery point stays at Damage.RecoveryPoint, above the LEO, so that
// a restart finds the damage below it again instead of taking it for a
// torn tail and cutting it off.
func (l *Log) Damaged() (Damage, bool) {
	if d := l.damage.Load(); d != nil {
		return *d, true
	}
	return Damage{}, false
}

// RepairDamage cuts a damaged log at the damage, deleting the segments
// after it, and makes it an ordinary log ending there: the records from
// Damage.Offset on must come from another replica. It does nothing to a
// log that is not damaged. A failure fails the log (see fail).
func (l *Log) RepairDamage() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.failed(); err != nil {
		return err
	}
	return l.repairLocked()
}

// repairLocked is RepairDamage under syncMu and mu.
func (l *Log) repairLocked() error {
	d := l.damage.Load()
	if d == nil {
		return nil
	}
	if start := l.logStartOffset.Load(); d.Offset < start {
		// The damage is below the log start: nothing before it is kept,
		// and the log restarts empty there (which clears the damage).
		if err := l.truncateFullyLocked(start); err != nil {
			return err
		}
	} else {
		segs := l.segmentList()
		k := slices.Index(segs, d.seg)
		if k < 0 {
			return l.fail(fmt.Errorf("%w: repair at %d: the damaged segment %d is gone", ErrStorage, d.Offset, d.seg.baseOffset))
		}
		if err := l.cutLocked(segs, k, d.position, d.Offset); err != nil {
			return l.fail(storageError(err, "repair damage at %d", d.Offset))
		}
		// The epoch cache already ends at the damage (openDamaged), and no
		// epoch could be assigned since.
		l.damage.Store(nil)
	}
	l.logger.Warn().Str("dir", l.dir).Int64("offset", d.Offset).Int64("recovery_point", d.RecoveryPoint).
		Msg("repaired damaged log: cut at the damage, the rest comes from the leader")
	return nil
}
