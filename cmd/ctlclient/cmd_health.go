package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// `ctlclient cluster health`, as `rpk cluster health`: one overview computed
// from the controller's DescribeCluster, once or (--watch) every --interval.

// The reason of a round without an answer (--watch); the others are
// client.ClusterHealth's.
const (
	reasonNoController      = "no_active_controller"
	defaultHealthyWait      = 5 * time.Minute
	defaultHealthInterval   = 2 * time.Second
	minHealthInterval       = 100 * time.Millisecond
	maxHealthListed         = 20
	healthOverviewHeading   = "CLUSTER HEALTH OVERVIEW"
	healthOverviewUnderline = "======================="
)

// healthReport is the overview, and cluster health's -o json.
type healthReport struct {
	Healthy          bool     `json:"healthy"`
	UnhealthyReasons []string `json:"unhealthyReasons"`
	// Controller is the address of the controller that answered (the
	// answer carries no controller id), ControllerEpoch its epoch.
	Controller                string          `json:"controller,omitempty"`
	ControllerEpoch           int32           `json:"controllerEpoch,omitempty"`
	Brokers                   []int32         `json:"brokers"`
	BrokersDown               []int32         `json:"brokersDown"`
	LeaderlessPartitions      []partitionJSON `json:"leaderlessPartitions"`
	LeaderlessCount           int             `json:"leaderlessCount"`
	UnderReplicatedPartitions []partitionJSON `json:"underReplicatedPartitions"`
	UnderReplicatedCount      int             `json:"underReplicatedCount"`
	// Error is why no controller could be asked (--watch goes on).
	Error string `json:"error,omitempty"`
}

type partitionJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

func (p partitionJSON) String() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

// checkHealth is the overview of one DescribeCluster answer given by the
// controller at addr (client.ClusterHealth).
func checkHealth(resp *replicadv1.DescribeClusterResponse, addr string) healthReport {
	h := client.ClusterHealth(resp)
	return healthReport{Healthy: h.Healthy, UnhealthyReasons: h.UnhealthyReasons, Controller: addr, ControllerEpoch: h.ControllerEpoch,
		Brokers: h.Brokers, BrokersDown: h.BrokersDown,
		LeaderlessPartitions: partitionsJSON(h.Leaderless), LeaderlessCount: len(h.Leaderless),
		UnderReplicatedPartitions: partitionsJSON(h.UnderReplicated), UnderReplicatedCount: len(h.UnderReplicated)}
}

func partitionsJSON(tps []client.TopicPartition) []partitionJSON {
	out := make([]partitionJSON, len(tps))
	for i, tp := range tps {
		out[i] = partitionJSON{tp.Topic, tp.Partition}
	}
	return out
}

// unreachableReport is the overview of a round in which no controller
// answered.
func unreachableReport(err error) healthReport {
	return healthReport{UnhealthyReasons: []string{reasonNoController}, Brokers: []int32{}, BrokersDown: []int32{},
		LeaderlessPartitions: []partitionJSON{}, UnderReplicatedPartitions: []partitionJSON{}, Error: err.Error()}
}

// writeHealth prints the overview as rpk does; stamp, when set, follows the
// heading (--watch).
func writeHealth(w io.Writer, r healthReport, stamp string) error {
	heading := healthOverviewHeading
	if stamp != "" {
		heading += " (" + stamp + ")"
	}
	fmt.Fprintf(w, "%s\n%s\n", heading, healthOverviewUnderline)
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	fmt.Fprintf(tw, "Healthy:\t%v\n", r.Healthy)
	fmt.Fprintf(tw, "Unhealthy reasons:\t%s\n", orDash(strings.Join(r.UnhealthyReasons, ",")))
	if r.Error != "" {
		fmt.Fprintf(tw, "Error:\t%s\n", r.Error)
	} else {
		fmt.Fprintf(tw, "Active controller:\t%s (controller epoch %d)\n", r.Controller, r.ControllerEpoch)
		fmt.Fprintf(tw, "All brokers:\t%s\n", orDash(joinInt32s(r.Brokers)))
		fmt.Fprintf(tw, "Brokers down:\t%s\n", orDash(joinInt32s(r.BrokersDown)))
		fmt.Fprintf(tw, "Leaderless partitions (%d):\t%s\n", r.LeaderlessCount, listPartitions(r.LeaderlessPartitions))
		fmt.Fprintf(tw, "Under-replicated partitions (%d):\t%s\n", r.UnderReplicatedCount, listPartitions(r.UnderReplicatedPartitions))
	}
	return tw.Flush()
}

// listPartitions is "orders-0,orders-1" ("-": none), at most maxHealthListed named.
func listPartitions(ps []partitionJSON) string {
	names := make([]string, 0, min(len(ps), maxHealthListed+1))
	for i, p := range ps {
		if i == maxHealthListed {
			names = append(names, fmt.Sprintf("... and %d more", len(ps)-maxHealthListed))
			break
		}
		names = append(names, p.String())
	}
	return orDash(strings.Join(names, ","))
}

func clusterHealthCommand() *command {
	return &command{
		name:    "cluster health",
		summary: "is the cluster healthy? brokers down, leaderless, under-replicated",
		usage:   "[--watch [--interval 2s] [--exit-when-healthy] [--wait-timeout D]]",
		details: `Prints an overview as 'rpk cluster health' does: healthy or not and why, the
controller that answered (its address; the answer carries no id) and its
epoch, the brokers registered and those down (session expired), the
leaderless partitions (no leader, or a leader whose broker is down) and the
under-replicated ones (ISR smaller than the replica set). Healthy: at least
one broker registered, none down, no leaderless and no under-replicated
partition. Unhealthy reasons: no_brokers, brokers_down,
leaderless_partitions, under_replicated_partitions, and with --watch
no_active_controller (no controller answered in a round: the watch goes on).

--watch asks again every --interval and prints the overview each time it
changes (its heading stamped with the time), until interrupted (Ctrl-C) or
--wait-timeout passes. --exit-when-healthy (with --watch) returns as soon as
the cluster is healthy; its --wait-timeout defaults to 5m.

-o json prints one JSON object, the final overview: {"healthy",
"unhealthyReasons", "controller", "controllerEpoch", "brokers",
"brokersDown", "leaderlessPartitions": [{"topic", "partition"}],
"leaderlessCount", "underReplicatedPartitions", "underReplicatedCount",
"error"}; nothing is printed meanwhile.

Exit status: 0 when the (last) overview is healthy; 1 when it is not (the
reasons on stderr), when no controller answered without --watch, or when
--exit-when-healthy's --wait-timeout passed first; 2 for usage errors.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 cluster health\n" +
			"ctlclient --controller 127.0.0.1:9090 cluster health --watch --exit-when-healthy --wait-timeout 2m",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			watch := fs.Bool("watch", false, "ask again every --interval, printing each change, until interrupted")
			exitWhenHealthy := fs.Bool("exit-when-healthy", false, "with --watch: exit 0 as soon as the cluster is healthy")
			interval := fs.Duration("interval", defaultHealthInterval, "with --watch: time between checks")
			waitTimeout := fs.Duration("wait-timeout", 0, "with --watch: stop after this long (default: until interrupted; 5m with --exit-when-healthy)")
			return func(ctx context.Context, e *env) error {
				set := setFlags(fs)
				if !*watch {
					for _, f := range []string{"exit-when-healthy", "interval", "wait-timeout"} {
						if set[f] {
							return usagef("--%s needs --watch", f)
						}
					}
				}
				if *interval < minHealthInterval {
					return usagef("--interval must be at least %v (got %v)", minHealthInterval, *interval)
				}
				if set["wait-timeout"] && *waitTimeout <= 0 {
					return usagef("--wait-timeout must be positive (got %v)", *waitTimeout)
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				if !*watch {
					resp, err := describeCluster(ctx, cc, "cluster health")
					if err != nil {
						return err
					}
					r := checkHealth(resp, cc.Active())
					if e.jsonOutput() {
						err = e.printJSONValue(r)
					} else {
						err = writeHealth(e.stdout, r, "")
					}
					if err != nil {
						return err
					}
					return unhealthyError(r, "")
				}
				wait := *waitTimeout
				if wait == 0 && *exitWhenHealthy {
					wait = defaultHealthyWait
				}
				return watchHealth(ctx, e, cc, *interval, wait, *exitWhenHealthy)
			}
		},
	}
}

// unhealthyError is the exit-1 error of an unhealthy overview, nil for a
// healthy one; when says when it was seen ("after 30s").
func unhealthyError(r healthReport, when string) error {
	if r.Healthy {
		return nil
	}
	msg := "cluster health: not healthy"
	if when != "" {
		msg += " " + when
	}
	msg += ": " + strings.Join(r.UnhealthyReasons, ", ")
	if r.Error != "" {
		msg += " (" + r.Error + ")"
	}
	return answerError{msg}
}

// watchHealth checks every interval, printing each changed overview, until
// ctx ends (an interrupt), wait passes (0: no bound) or, with
// exitWhenHealthy, the cluster is healthy. Its result is the last
// overview's (see unhealthyError).
func watchHealth(ctx context.Context, e *env, cc *controllerClient, interval, wait time.Duration, exitWhenHealthy bool) error {
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if wait > 0 {
		wctx, cancel = context.WithTimeout(ctx, wait)
	}
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last *healthReport
	var lastShown []byte
	for {
		resp, err := describeCluster(wctx, cc, "cluster health")
		if wctx.Err() != nil {
			break // interrupted or out of time mid-call: the last full round counts
		}
		var r healthReport
		if err != nil {
			r = unreachableReport(err)
		} else {
			r = checkHealth(resp, cc.Active())
		}
		last = &r
		if !e.jsonOutput() {
			var b bytes.Buffer
			if err := writeHealth(&b, r, ""); err != nil {
				return err
			}
			if !bytes.Equal(b.Bytes(), lastShown) {
				if lastShown != nil {
					fmt.Fprintln(e.stdout)
				}
				if err := writeHealth(e.stdout, r, time.Now().Format(time.TimeOnly)); err != nil {
					return err
				}
				lastShown = b.Bytes()
			}
		}
		if exitWhenHealthy && r.Healthy {
			break
		}
		select {
		case <-wctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	if last == nil {
		r := unreachableReport(errors.New("stopped before the first check answered"))
		last = &r
	}
	when := ""
	switch {
	case ctx.Err() != nil:
		when = "when interrupted"
	case wctx.Err() != nil:
		when = "after " + wait.String()
	}
	if e.jsonOutput() {
		if err := e.printJSONValue(*last); err != nil {
			return err
		}
	}
	return unhealthyError(*last, when)
}
