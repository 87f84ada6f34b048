package integration

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// retentionRow is one row of `ctlclient retention run`'s table.
type retentionRow struct {
	partition, broker       int32
	role                    string
	before, after, segments int64
	reason                  string
}

var retentionRowRe = regexp.MustCompile(`^(\S+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(-?\d+) -> (-?\d+)\s+(\d+)\s+\d+\s+(\S+)$`)

func parseRetentionRows(t *testing.T, out string) []retentionRow {
	t.Helper()
	var rows []retentionRow
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		m := retentionRowRe.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			t.Fatalf("retention run row %q in:\n%s", line, out)
		}
		n := func(i int) int64 { v, _ := strconv.ParseInt(m[i], 10, 64); return v }
		rows = append(rows, retentionRow{partition: int32(n(2)), broker: int32(n(3)), role: m[4], before: n(5), after: n(6),
			segments: n(7), reason: m[8]})
	}
	return rows
}

// An operator checks retention before trusting it: a topic with a short
// retention.ms on brokers whose periodic check is an hour away; `ctlclient
// retention run` deletes its expired segments now on the leader (the
// followers follow its log start, or delete by their own check), and says
// so per replica (log start before -> after, what it
// deleted, by retention.ms); a consumer below the new log start gets
// OFFSET_OUT_OF_RANGE; describe shows when the periodic check runs next.
func TestRetentionRunDeletesNowAndDescribeShowsTheCheck(t *testing.T) {
	c := newCtlCluster(t, 2*time.Second, "--log-retention-check-interval", "1h", "--max-batch-bytes", "2048")
	ctl := func(args ...string) ctlResult {
		return runCtlclient(t, nil, "", append([]string{"--controller", c.ctlAddr}, args...)...)
	}
	ctl("create-topic", "--topic", "logs", "--partitions", "1", "--replication-factor", "3",
		"--config", "retention.ms=1000", "--config", "segment.bytes=4096").want(t, 0)
	p, err := c.partitionState("logs", 0)
	if err != nil {
		t.Fatal(err)
	}
	leader := p.GetLeader()
	testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("logs", 0, "first") })
	_, lc := c.broker(leader)
	for i := range 39 {
		lc.produce("logs", 0, -1, fmt.Sprintf("%03d-%s", i, strings.Repeat("r", 300)))
	}
	// All 40 committed, on every replica (acks=all: the followers' HW
	// follows at their next fetch).
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, id := range clusterIDs {
			_, cl := c.broker(id)
			d, err := cl.partition("logs", 0)
			if err != nil {
				return err
			}
			if d.GetHighWatermark() != 40 {
				return fmt.Errorf("broker %d: HW %d", id, d.GetHighWatermark())
			}
		}
		return nil
	})

	// Before a second has passed since the last record, some segments
	// may not be expired yet: run until the leader's log start is the
	// active segment's base, as the periodic check would end up.
	var rows []retentionRow
	deleted := map[int32]int64{}
	testutil.Eventually(t, 30*time.Second, func() error {
		r := ctl("retention", "run", "logs").want(t, 0)
		rows = parseRetentionRows(t, r.stdout)
		if len(rows) != 3 {
			return fmt.Errorf("%d rows, want one per replica:\n%s", len(rows), r.stdout)
		}
		for _, row := range rows {
			deleted[row.broker] += row.segments
			// A leader deletes by retention.ms. A follower does too, or,
			// when its fetch brought the leader's new log start before the
			// run reached it, deletes what lies below that log start.
			okReason := row.reason == "retention.ms" || row.role == "follower" && row.reason == "log-start-offset"
			if row.segments > 0 && !okReason {
				t.Fatalf("broker %d (%s) deleted by %q, want retention.ms:\n%s", row.broker, row.role, row.reason, r.stdout)
			}
			if row.after < row.before {
				t.Fatalf("log start went back:\n%s", r.stdout)
			}
		}
		d, err := lc.partition("logs", 0)
		if err != nil {
			return err
		}
		var leaderAfter int64 = -1
		for _, row := range rows {
			if row.broker == leader {
				if row.role != "leader" || row.after != d.GetLogStartOffset() {
					t.Fatalf("leader row %+v, the broker says log start %d", row, d.GetLogStartOffset())
				}
				leaderAfter = row.after
			}
		}
		if d.GetLogStartOffset() == 0 || d.GetLogEndOffset() != 40 || deleted[leader] == 0 {
			return fmt.Errorf("leader log [%d, %d), %d segments deleted", d.GetLogStartOffset(), d.GetLogEndOffset(), deleted[leader])
		}
		// The followers delete theirs too: by their own check, or by
		// following the leader's log start at their next fetch.
		for _, row := range rows {
			if row.after < leaderAfter {
				return fmt.Errorf("broker %d log start %d, below the leader's %d:\n%s", row.broker, row.after, leaderAfter, r.stdout)
			}
		}
		t.Logf("ctlclient retention run logs:\n%s", r.stdout)
		return nil
	})
	d, err := lc.partition("logs", 0)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := lc.log.Consume(ctx(t), &replicadv1.ConsumeRequest{Topic: "logs", Partition: 0, Offset: d.GetLogStartOffset() - 1})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE {
		t.Fatalf("consume below the log start %d: %v %v", d.GetLogStartOffset(), resp, err)
	}
	if recs := lc.consumeFrom("logs", 0, d.GetLogStartOffset()); int64(len(recs)) != 40-d.GetLogStartOffset() {
		t.Fatalf("%d records kept from %d", len(recs), d.GetLogStartOffset())
	}

	// The periodic check has not run (an hour away): describe says so.
	lb, _ := c.broker(leader)
	r := runCtlclient(t, nil, "", "--broker", lb.Addr, "describe").want(t, 0)
	if !regexp.MustCompile(`(?m)^retention: no check yet, next in (59m\d+s|1h0m0s)$`).MatchString(r.stdout) {
		t.Fatalf("describe:\n%s", r.stdout)
	}
	// A partition the topic lacks: exit 1, naming it.
	r = ctl("retention", "run", "logs", "--partition", "4").want(t, 1)
	if !strings.Contains(r.stderr, "no partition 4") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// describe shows the periodic check's last run and next one as they
// happen (every 500 ms here).
func TestDescribeShowsTheLastRetentionCheck(t *testing.T) {
	b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: 1, LogDirs: []string{t.TempDir()},
		Args: []string{"--log-retention-check-interval", "500ms"}})
	cl := newClient(t, b.Dial(t))
	cl.sendLeaderAndIsr(1, &replicadv1.PartitionState{Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 1,
		Isr: []int32{1}, Replicas: []int32{1}, IsNew: true}, []*replicadv1.Broker{endpoint(t, 1, b)})
	re := regexp.MustCompile(`(?m)^retention: last check \d+(ms|s) ago, next (in \d+ms|due now)$`)
	testutil.Eventually(t, 15*time.Second, func() error {
		d := cl.describe()
		if d.GetLastRetentionCheckMs() == 0 || d.GetNextRetentionCheckMs() <= d.GetLastRetentionCheckMs() {
			return fmt.Errorf("last %d next %d", d.GetLastRetentionCheckMs(), d.GetNextRetentionCheckMs())
		}
		if r := runCtlclient(t, nil, "", "--broker", b.Addr, "describe").want(t, 0); !re.MatchString(r.stdout) {
			return fmt.Errorf("describe:\n%s", r.stdout)
		}
		return nil
	})
}
