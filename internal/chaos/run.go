package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Config is one chaos run.
type Config struct {
	Options
	Seed   uint64
	Rounds int
	// FirstRound skips the schedule's rounds before it (1-based; 0 or 1:
	// none), to replay the round of a long run that found a bug without
	// the ones before it.
	FirstRound int
	Harsh      bool
	Partitions int32
	Producers  int // per partition
	// Logf prints the nemesis's lines and progress (the test log).
	Logf func(string)
}

// Report is a run's figures and findings.
type Report struct {
	Config
	Mode                     string
	Faults                   map[string]int
	Attempts, Acked, Unacked int
	Reads, FinalRecords      int
	LongestGap               []time.Duration // per partition
	LongestUnexcused         []time.Duration
	GapBound                 time.Duration // checked in the default mix only
	Findings
	Unavailable []string       // partitions over the bound (default mix)
	Connections map[string]int // accepted by the proxy, by "from->to"
	Elapsed     time.Duration
}

// Failed says whether the run found anything wrong.
func (r *Report) Failed() bool {
	f := r.Findings
	return len(f.Lost)+len(f.Moved)+len(f.Divergent)+len(f.Changed)+len(f.Duplicates)+len(f.Problems)+len(r.Unavailable) > 0 || f.Heal != nil
}

// Summary is the report in a few lines.
func (r *Report) Summary() string {
	var b strings.Builder
	verdict := "PASS"
	if r.Failed() {
		verdict = "FAIL"
	}
	mix := "default"
	if r.Harsh {
		mix = "harsh"
	}
	rounds := fmt.Sprintf("%d rounds", r.Rounds)
	if r.FirstRound > 1 {
		rounds = fmt.Sprintf("rounds %d-%d", r.FirstRound, r.Rounds)
	}
	transport := "plaintext"
	if r.TLS {
		transport = "mutual TLS"
	}
	fmt.Fprintf(&b, "chaos %s: %s store, %s, %d brokers, %s mix, seed %d, %s in %v\n", verdict, r.Mode, transport, r.Brokers, mix, r.Seed, rounds, r.Elapsed.Round(time.Second))
	kinds := make([]string, 0, len(r.Faults))
	for k := range r.Faults {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var fs []string
	for _, k := range kinds {
		fs = append(fs, fmt.Sprintf("%s=%d", k, r.Faults[k]))
	}
	fmt.Fprintf(&b, "  faults: %s\n", strings.Join(fs, " "))
	fmt.Fprintf(&b, "  produce attempts %d, acknowledged %d, failed or unknown %d; consumer reads %d; final records %d\n",
		r.Attempts, r.Acked, r.Unacked, r.Reads, r.FinalRecords)
	fmt.Fprintf(&b, "  lost %d, moved %d, divergent %d, changed reads %d, duplicates %d, process problems %d\n",
		len(r.Lost), len(r.Moved), len(r.Divergent), len(r.Changed), len(r.Duplicates), len(r.Problems))
	var longest, unexcused time.Duration
	for p := range r.LongestGap {
		longest, unexcused = max(longest, r.LongestGap[p]), max(unexcused, r.LongestUnexcused[p])
	}
	fmt.Fprintf(&b, "  longest time without an acknowledgement: %v (%v outside controller outages; bound %v", longest.Round(time.Millisecond), unexcused.Round(time.Millisecond), r.GapBound)
	if r.Harsh {
		b.WriteString(", not checked in the harsh mix")
	}
	b.WriteString(")\n")
	for p, g := range r.LongestGap {
		fmt.Fprintf(&b, "    partition %d: %v (%v)\n", p, g.Round(time.Millisecond), r.LongestUnexcused[p].Round(time.Millisecond))
	}
	list := func(name string, l []string) {
		for _, s := range l {
			fmt.Fprintf(&b, "  %s: %s\n", name, s)
		}
	}
	list("LOST", r.Lost)
	list("MOVED", r.Moved)
	list("DIVERGENT", r.Divergent)
	list("CHANGED", r.Changed)
	list("DUPLICATE", r.Duplicates)
	list("PROBLEM", r.Problems)
	list("UNAVAILABLE", r.Unavailable)
	if r.Heal != nil {
		fmt.Fprintf(&b, "  HEAL: %v\n", r.Heal)
	}
	conns := make([]string, 0, len(r.Connections))
	for k, v := range r.Connections {
		conns = append(conns, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(conns)
	fmt.Fprintf(&b, "  connections through the proxy: %s\n", strings.Join(conns, " "))
	fmt.Fprintf(&b, "  history and process logs: %s\n", r.Dir)
	fmt.Fprintf(&b, "  replay: make chaos SEED=%d ROUNDS=%d%s\n", r.Seed, r.Rounds, replayFlags(r.Config))
	return b.String()
}

func replayFlags(c Config) string {
	var s string
	if c.Etcd {
		s += " ETCD=1"
	}
	if c.TLS {
		s += " TLS=1"
	}
	if c.Harsh {
		s += " HARSH=1"
	}
	if c.FirstRound > 1 {
		s += fmt.Sprintf(" FROM=%d", c.FirstRound)
	}
	if c.Brokers != 3 {
		s += fmt.Sprintf(" BROKERS=%d", c.Brokers)
	}
	return s
}

// Run starts a cluster, runs the workload under cfg.Rounds faults, heals,
// checks, and writes summary.txt and history.jsonl to cfg.Dir.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	rep := &Report{Config: cfg, Mode: "embedded", Faults: map[string]int{}}
	if cfg.Etcd {
		rep.Mode = "etcd (3 controllers, 3 members)"
	}
	rep.GapBound = max(cfg.SessionTimeout, cfg.ReplicaLag) + 5*time.Second
	h, err := newHistory(filepath.Join(cfg.Dir, "history.jsonl"), cfg.Logf)
	if err != nil {
		return nil, err
	}
	defer h.close()
	c, err := StartCluster(cfg.Options)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	h.note("start", "%s: %d brokers, %d partitions, RF 3, min ISR 2, session %v, replica lag %v, small dirs %v",
		rep.Mode, cfg.Brokers, cfg.Partitions, cfg.SessionTimeout, cfg.ReplicaLag, cfg.SmallDirs)
	if err := createTopic(ctx, c, cfg.Partitions); err != nil {
		return nil, err
	}
	if err := c.settle(ctx, cfg.Partitions, 60*time.Second); err != nil {
		return nil, fmt.Errorf("the new cluster: %w", err)
	}
	w := newWorkload(c, h, cfg.Partitions, cfg.Producers)
	w.Start()
	stopped := false
	defer func() {
		if !stopped {
			w.Stop()
		}
	}()
	workStart := time.Now()
	for p := range cfg.Partitions {
		if err := waitFor(ctx, 30*time.Second, func() bool { return !w.lastAck(p).IsZero() }); err != nil {
			return nil, fmt.Errorf("no acknowledgement on partition %d before any fault", p)
		}
	}
	mix := DefaultMix(cfg.Etcd, cfg.SmallDirs)
	if cfg.Harsh {
		mix = HarshMix(cfg.Etcd, cfg.SmallDirs)
	}
	nem := &nemesis{c: c, h: h, w: w, counts: rep.Faults}
	schedule := Schedule(cfg.Seed, cfg.Rounds, mix, int32(cfg.Brokers), cfg.Partitions, cfg.SessionTimeout)
	for i, f := range schedule {
		if ctx.Err() != nil {
			break
		}
		if i+1 < cfg.FirstRound {
			continue
		}
		h.note("round", "%d/%d", i+1, len(schedule))
		if err := nem.run(ctx, f); err != nil {
			rep.Heal = errors.Join(rep.Heal, fmt.Errorf("round %d (%s): %w", i+1, f, err))
			break
		}
		// At most one broker faulty at a time: the next fault waits for
		// full ISRs (a restarted broker is faulty until it caught up).
		healed := time.Now()
		if err := c.settle(ctx, cfg.Partitions, 45*time.Second); err != nil {
			h.note("slow-heal", "round %d: %v", i+1, err)
		}
		// ... and for every partition to take writes again, so faults do
		// not pile up on a cluster still stalled by the last one.
		for p := range cfg.Partitions {
			if err := waitFor(ctx, 30*time.Second, func() bool { return w.lastAck(p).After(healed) }); err != nil {
				h.note("slow-heal", "round %d: no acknowledgement on partition %d within 30s of the heal", i+1, p)
			}
		}
	}
	// Heal everything that may still be off, then wait for full ISRs.
	c.net.Heal()
	for _, group := range [][]*node{c.etcd, c.controllers, c.brokers} {
		for _, n := range group {
			if n.paused.Load() {
				c.Resume(n)
			}
			if !n.proc.running() {
				h.note("heal", "restart %s, found down", n.name)
				if err := c.Restart(n); err != nil {
					rep.Heal = errors.Join(rep.Heal, err)
				}
			}
		}
	}
	if err := c.settle(ctx, cfg.Partitions, 90*time.Second); err != nil {
		rep.Heal = errors.Join(rep.Heal, fmt.Errorf("final heal: %w", err))
	}
	workEnd := time.Now()
	w.Stop()
	stopped = true
	acks, reads, changed, attempts, failed, nread := w.snapshot()
	rep.Attempts, rep.Acked, rep.Unacked, rep.Reads = attempts, len(acks), failed, nread
	rep.Changed = append(rep.Changed, changed...)
	if rep.Heal == nil {
		rep.FinalRecords = check(ctx, c, cfg.Partitions, acks, reads, &rep.Findings, h)
	}
	rep.LongestGap, rep.LongestUnexcused = gaps(acks, cfg.Partitions, workStart, workEnd, nem.excused)
	if !cfg.Harsh {
		for p, g := range rep.LongestUnexcused {
			if g > rep.GapBound {
				rep.Unavailable = append(rep.Unavailable, fmt.Sprintf("partition %d: %v without an acknowledgement (bound %v)", p, g.Round(time.Millisecond), rep.GapBound))
			}
		}
	}
	rep.Problems = c.Problems()
	rep.Connections = c.net.Accepted()
	rep.Elapsed = time.Since(start)
	_ = os.WriteFile(filepath.Join(cfg.Dir, "summary.txt"), []byte(rep.Summary()), 0o644)
	return rep, nil
}

func createTopic(ctx context.Context, c *Cluster, parts int32) error {
	return retryFor(ctx, 60*time.Second, func() error {
		ctl, _, err := c.Controller(ctx)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := ctl.CreateTopic(cctx, &replicadv1.CreateTopicRequest{Topic: Topic, Partitions: parts, ReplicationFactor: 3})
		if err != nil {
			return err
		}
		switch resp.GetErrorCode() {
		case replicadv1.ErrorCode_ERROR_CODE_NONE, replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS:
			return nil
		}
		return fmt.Errorf("create topic: %v %s", resp.GetErrorCode(), resp.GetErrorMessage())
	})
}

func retryFor(ctx context.Context, d time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
