package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// A fault kind the nemesis injects.
const (
	KillBroker        = "kill-broker"        // kill -9, then a restart
	PauseBroker       = "pause-broker"       // SIGSTOP past the session timeout, then SIGCONT
	KillController    = "kill-controller"    // kill -9 of the active controller, then a restart
	PauseController   = "pause-controller"   // SIGSTOP of the active controller past the session timeout while a broker dies
	PartitionPeers    = "partition-peers"    // a broker cut from the other brokers, not from the controller
	PartitionCtl      = "partition-ctl"      // a broker cut from the controllers only
	PartitionOneWay   = "partition-one-way"  // a broker's outgoing (or incoming) bytes held, one direction
	SlowLinks         = "slow-links"         // every link of a broker delayed
	DiskFull          = "disk-full"          // a broker's small log dir filled up
	EtcdPartition     = "etcd-partition"     // an etcd member cut from everyone while a broker dies
	EtcdPause         = "etcd-pause"         // an etcd member paused while a broker dies
	harshDoubleBroker = "two-brokers-killed" // harsh: two brokers killed at once
)

// Fault is one scheduled fault: its kind, which partition's leader (or
// which broker) it targets, how long it holds, and the settle time after
// its heal. The schedule is drawn from the seed alone, so one seed replays
// the same faults; which broker "the leader of partition 2" is, is the
// cluster's doing.
type Fault struct {
	Kind string
	// Leader: target the leader of Partition; otherwise Broker (1-based).
	Leader    bool
	Partition int32
	Broker    int32
	Member    int // etcd member, 0-based
	Hold      time.Duration
	Detail    int // kind-specific: a direction, a delay in ms
}

func (f Fault) String() string {
	target := fmt.Sprintf("broker %d", f.Broker)
	if f.Leader {
		target = fmt.Sprintf("the leader of partition %d", f.Partition)
	}
	switch f.Kind {
	case KillController:
		target = "the active controller"
	case PauseController:
		target = "the active controller, and " + target
	case LongCut:
		mode := "silent"
		if f.Detail == 1 {
			mode = "refused"
		}
		return fmt.Sprintf("%s (%s) %s from the other brokers for %v", f.Kind, mode, target, f.Hold.Round(time.Millisecond))
	case EtcdPartition, EtcdPause:
		m := fmt.Sprintf("etcd member %d", f.Member+1)
		if f.Leader {
			m = "the etcd leader"
		}
		target = fmt.Sprintf("%s, and the leader of partition %d", m, f.Partition)
	}
	return fmt.Sprintf("%s %s for %v (detail %d)", f.Kind, target, f.Hold.Round(time.Millisecond), f.Detail)
}

// Mix is the fault kinds to draw from, with weights.
type Mix map[string]int

// DefaultMix keeps at most one broker faulty at a time.
func DefaultMix(etcd, disk bool) Mix {
	m := Mix{KillBroker: 4, PauseBroker: 3, KillController: 2, PauseController: 1, PartitionPeers: 2,
		PartitionCtl: 2, PartitionOneWay: 2, SlowLinks: 2}
	if disk {
		m[DiskFull] = 1
	}
	if etcd {
		m[EtcdPartition], m[EtcdPause] = 1, 1
	}
	return m
}

// HarshMix adds two brokers down at once (min ISR 2 of 3 then refuses
// writes: availability is not checked).
func HarshMix(etcd, disk bool) Mix {
	m := DefaultMix(etcd, disk)
	m[harshDoubleBroker] = 2
	return m
}

// Schedule draws rounds faults from seed.
func Schedule(seed uint64, rounds int, mix Mix, brokers, parts int32, session time.Duration) []Fault {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var kinds []string
	for k := range mix {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds) // map order is random: sort before drawing
	total := 0
	for _, k := range kinds {
		total += mix[k]
	}
	out := make([]Fault, 0, rounds)
	for range rounds {
		x := r.IntN(total)
		var kind string
		for _, k := range kinds {
			if x < mix[k] {
				kind = k
				break
			}
			x -= mix[k]
		}
		f := Fault{Kind: kind, Broker: 1 + r.Int32N(brokers), Partition: r.Int32N(parts), Member: r.IntN(3),
			Hold: time.Duration(1500+r.IntN(3500)) * time.Millisecond}
		// Leaders more often: two thirds of broker faults hit a leader.
		f.Leader = r.IntN(3) < 2
		switch kind {
		case PauseBroker, PauseController, EtcdPause:
			f.Hold = session + time.Duration(500+r.IntN(3000))*time.Millisecond
		case PartitionPeers, PartitionCtl, PartitionOneWay, EtcdPartition:
			f.Hold = session + time.Duration(r.IntN(4000))*time.Millisecond
			f.Detail = r.IntN(2) // one-way: 0 outgoing held, 1 incoming held
		case SlowLinks:
			f.Detail = 100 + r.IntN(700) // ms
		case DiskFull:
			f.Hold = time.Duration(2000+r.IntN(3000)) * time.Millisecond
		case harshDoubleBroker:
			f.Detail = int(1 + r.Int32N(brokers)) // the second broker
		}
		out = append(out, f)
	}
	return out
}

// nemesis applies faults to a cluster and heals them.
type nemesis struct {
	c *Cluster
	h *History
	w *Workload
	// excused are the spans in which the availability bound does not hold:
	// the controller down or paused (nobody can elect), until one session
	// timeout after the heal.
	excused [][2]time.Time
	counts  map[string]int
	// ops counts the operator calls made, by what they did.
	ops map[string]int
	// harsh: the harsh mix (an operator action may take brokers down in
	// turn).
	harsh bool
}

// target resolves f's broker: the leader of its partition when it has one.
func (n *nemesis) target(ctx context.Context, f Fault) int32 {
	if f.Leader {
		if l := n.w.leader(ctx, f.Partition, true); l > 0 {
			return l
		}
	}
	return f.Broker
}

func (n *nemesis) brokerNames(except int32) []string {
	var out []string
	for _, b := range n.c.brokers {
		if b.name != fmt.Sprintf("broker-%d", except) {
			out = append(out, b.name)
		}
	}
	return out
}

func (n *nemesis) controllerNames() []string {
	var out []string
	for _, c := range n.c.controllers {
		out = append(out, c.name)
	}
	return out
}

// run injects f, holds it, heals it.
func (n *nemesis) run(ctx context.Context, f Fault) error {
	n.counts[f.Kind]++
	b := n.target(ctx, f)
	bn := n.c.Broker(b)
	if strings.HasPrefix(f.Kind, "op-") {
		n.h.note("operator", "%s -> partition %d (broker %d)", f.Kind, f.Partition, b)
		return n.operate(ctx, f)
	}
	if f.Kind == KillController {
		n.h.note("fault", "%s", f)
	} else {
		n.h.note("fault", "%s -> broker %d", f, b)
	}
	hold := func() {
		t := time.NewTimer(f.Hold)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	switch f.Kind {
	case KillBroker:
		n.c.Kill(bn)
		hold()
		n.h.note("heal", "restart broker %d", b)
		return n.c.Restart(bn)
	case harshDoubleBroker:
		other := int32(f.Detail)
		if other == b {
			other = b%int32(len(n.c.brokers)) + 1
		}
		n.c.Kill(bn)
		n.c.Kill(n.c.Broker(other))
		hold()
		n.h.note("heal", "restart brokers %d and %d", b, other)
		if err := n.c.Restart(bn); err != nil {
			return err
		}
		return n.c.Restart(n.c.Broker(other))
	case PauseBroker:
		n.c.Pause(bn)
		hold()
		n.h.note("heal", "resume broker %d", b)
		n.c.Resume(bn)
	case KillController:
		cn, _, err := n.c.ActiveController(ctx)
		if err != nil {
			return fmt.Errorf("no active controller to kill: %w", err)
		}
		start := time.Now()
		n.c.Kill(cn)
		hold()
		n.h.note("heal", "restart %s", cn.name)
		err = n.c.Restart(cn)
		n.excuse(start, time.Now().Add(n.c.opts.SessionTimeout))
		return err
	case PauseController:
		cn, _, err := n.c.ActiveController(ctx)
		if err != nil {
			return fmt.Errorf("no active controller to pause: %w", err)
		}
		start := time.Now()
		n.c.Pause(cn)
		n.c.Kill(bn) // brokers fail while the controller sleeps
		n.h.note("fault", "and kill -9 broker %d while %s is paused", b, cn.name)
		hold()
		n.h.note("heal", "resume %s, restart broker %d", cn.name, b)
		n.c.Resume(cn)
		err = n.c.Restart(bn)
		n.excuse(start, time.Now().Add(n.c.opts.SessionTimeout))
		return err
	case PartitionPeers:
		for _, o := range n.brokerNames(b) {
			n.c.net.Cut(bn.name, o)
			n.c.net.Cut(o, bn.name)
		}
		hold()
	case LongCut:
		// The leader of a partition cut from its followers: its
		// partitions fall under min ISR and refuse acks=all until the heal
		// (excused); from the heal on the availability bound holds again,
		// so followers that come back late are caught by it and by the
		// heal bound.
		start := time.Now()
		for _, o := range n.brokerNames(b) {
			if f.Detail == 1 {
				n.c.net.Refuse(bn.name, o)
				n.c.net.Refuse(o, bn.name)
			} else {
				n.c.net.Cut(bn.name, o)
				n.c.net.Cut(o, bn.name)
			}
		}
		hold()
		n.excuse(start, time.Now())
	case PartitionCtl:
		for _, o := range n.controllerNames() {
			n.c.net.Cut(bn.name, o)
			n.c.net.Cut(o, bn.name)
		}
		hold()
	case PartitionOneWay:
		for _, o := range append(n.brokerNames(b), n.controllerNames()...) {
			if f.Detail == 0 {
				n.c.net.Cut(bn.name, o)
			} else {
				n.c.net.Cut(o, bn.name)
			}
		}
		hold()
	case SlowLinks:
		d := time.Duration(f.Detail) * time.Millisecond
		for _, o := range append(n.brokerNames(b), n.controllerNames()...) {
			n.c.net.Slow(bn.name, o, d)
			n.c.net.Slow(o, bn.name, d)
		}
		hold()
	case DiskFull:
		filler := filepath.Join(n.c.brokerSmallDir(b), "filler")
		if err := fill(filler); err != nil {
			return err
		}
		hold()
		n.h.note("heal", "free broker %d's small dir, restart it (an offline dir stays offline until then)", b)
		if err := os.Remove(filler); err != nil {
			return err
		}
		n.c.Kill(bn)
		return n.c.Restart(bn)
	case EtcdPartition, EtcdPause:
		m := n.c.etcd[f.Member]
		if f.Leader {
			// The raft leader: cut off, the majority must elect another
			// before any write commits, and the controller's writes stall.
			if l := n.c.etcdLeader(ctx); l != nil {
				m = l
			}
		}
		n.h.note("fault", "etcd member: %s", m.name)
		// Not excused: the controllers stay up, and the store sends an
		// attempt that hangs on the member cut off to another one
		// (EtcdConfig.AttemptTimeout). Before it did, a write waited for
		// gRPC's keepalive (13 s): 11.9 and 12.7 s without an
		// acknowledgement in CI runs (seed 4 rounds 35-36, seed 38357).
		if f.Kind == EtcdPause {
			n.c.Pause(m)
		} else {
			for _, other := range n.c.etcd {
				if other != m {
					// A member's own connections are attributed to its
					// peer proxy's name (see Cluster.startAt).
					n.c.net.Cut(m.name+"-peer", other.name+"-peer")
					n.c.net.Cut(other.name+"-peer", m.name+"-peer")
				}
			}
			for _, cn := range n.controllerNames() {
				n.c.net.Cut(cn, m.name)
				n.c.net.Cut(m.name, cn)
			}
		}
		n.c.Kill(bn) // controller work while etcd is degraded
		n.h.note("fault", "and kill -9 broker %d while %s is degraded", b, m.name)
		hold()
		n.h.note("heal", "heal %s, restart broker %d", m.name, b)
		if f.Kind == EtcdPause {
			n.c.Resume(m)
		}
		n.c.net.Heal()
		return n.c.Restart(bn)
	default:
		return fmt.Errorf("unknown fault %q", f.Kind)
	}
	n.h.note("heal", "network healed")
	n.c.net.Heal()
	return nil
}

func (n *nemesis) excuse(from, to time.Time) { n.excused = append(n.excused, [2]time.Time{from, to}) }

// fill writes path until its file system is full (ENOSPC), bounded at 1 GiB.
func fill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for range 1024 {
		if _, err := f.Write(buf); err != nil {
			return nil // full
		}
	}
	return fmt.Errorf("%s: 1 GiB written and not full", path)
}

// ProducerRestart is a producer restarting with its producer ID during a
// fault round (issue 21): InitProducerId with its ID bumps the epoch, the
// new instance takes over, and the old one, still sending for a while,
// must be fenced on every partition the new one writes to.
type ProducerRestart struct {
	Producer int           // 1-based
	After    time.Duration // into the round's fault
}

// DefaultRestartPercent is the share of fault rounds during which a
// producer restarts with its ID.
const DefaultRestartPercent = 50

// RestartSchedule draws, for each of rounds fault rounds, whether a
// producer restarts during it (percent of them) and which, when: nil
// entries are none. A stream of its own, so a seed's faults and extra
// rounds stay as they were.
func RestartSchedule(seed uint64, rounds, percent, producers int) []*ProducerRestart {
	r := rand.New(rand.NewPCG(seed, 0x91d))
	out := make([]*ProducerRestart, rounds)
	for i := range rounds {
		x, k, after := r.IntN(100), 1+r.IntN(max(producers, 1)), time.Duration(200+r.IntN(2800))*time.Millisecond
		if x < percent {
			out[i] = &ProducerRestart{Producer: k, After: after}
		}
	}
	return out
}

// DefaultDeletePercent is the share of fault rounds during which the
// records of the fault's partition are deleted up to its HW.
const DefaultDeletePercent = 30

// DeleteSchedule draws, for each of rounds fault rounds, whether the
// records of the round's partition are deleted (DeleteRecords up to the
// HW) while its fault holds, and when: nil entries are none. Writes in
// doubt then meet a log whose start moved past their producers' earlier
// batches (issue 21: the producer state rolls back with the log). A
// stream of its own, as RestartSchedule's.
func DeleteSchedule(seed uint64, rounds, percent int) []*time.Duration {
	r := rand.New(rand.NewPCG(seed, 0xde1))
	out := make([]*time.Duration, rounds)
	for i := range rounds {
		x, after := r.IntN(100), time.Duration(300+r.IntN(2700))*time.Millisecond
		if x < percent {
			out[i] = &after
		}
	}
	return out
}
