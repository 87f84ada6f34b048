package main

import (
	"context"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
)

// RunRetention answers, for each partition of topic it holds (or the one
// named), that retention by retention.ms took the first half of its
// records in one segment of 100 bytes a record.
func (b *memBroker) RunRetention(_ context.Context, topic string, partition *int32) core.RetentionResponse {
	b.mu.Lock()
	defer b.mu.Unlock()
	resp := core.RetentionResponse{BrokerID: 1}
	for t, recs := range b.logs {
		if t.Topic != topic || partition != nil && t.Partition != *partition {
			continue
		}
		n := int64(len(recs) / 2)
		r := core.RetentionResult{TopicPartition: t, Leader: true, LogStartAfter: n}
		if n > 0 {
			r.DeletedSegments, r.DeletedBytes, r.Reason = 1, 100*n, "retention.ms"
		}
		resp.Results = append(resp.Results, r)
	}
	if partition != nil && len(resp.Results) == 0 {
		resp.Results = append(resp.Results, core.RetentionResult{TopicPartition: tp.TopicPartition{Topic: topic, Partition: *partition},
			Error: core.ErrUnknownTopicOrPartition, LogStartBefore: -1, LogStartAfter: -1})
	}
	sort.Slice(resp.Results, func(i, j int) bool { return tp.Less(resp.Results[i].TopicPartition, resp.Results[j].TopicPartition) })
	return resp
}

// retention run against one --broker: a row per partition with the log
// start before -> after and what was deleted; --partition narrows it, a
// partition the broker lacks exits 1 naming the code, bad usage exits 2.
func TestRetentionRunCommand(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	for _, v := range []string{"a", "b", "c", "d"} {
		wantCode(t, ctl(t, addr, "", "produce", "--topic", "orders", "--partition", "0", "--value", v), 0)
	}
	wantCode(t, ctl(t, addr, "", "produce", "--topic", "orders", "--partition", "1", "--value", "x"), 0)
	r := ctl(t, addr, "", "retention", "run", "orders")
	wantCode(t, r, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "LOG-START") ||
		!regexp.MustCompile(`^orders\s+0\s+1\s+leader\s+0 -> 2\s+1\s+200\s+retention\.ms$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^orders\s+1\s+1\s+leader\s+0 -> 0\s+0\s+0\s+-$`).MatchString(lines[2]) {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	r = ctl(t, addr, "", "retention", "run", "--topic", "orders", "--partition", "1")
	wantCode(t, r, 0)
	if strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, "orders  1") {
		t.Fatalf("--partition 1: %q", r.stdout)
	}
	r = ctl(t, addr, "", "-o", "json", "retention", "run", "orders", "--partition", "0")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, `"logStartOffsetAfter"`) || !strings.Contains(r.stdout, `"retention.ms"`) {
		t.Fatalf("-o json: %q", r.stdout)
	}
	r = ctl(t, addr, "", "retention", "run", "orders", "--partition", "5")
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Fatalf("stderr %q", r.stderr)
	}
	for _, args := range [][]string{
		{"retention", "run"},
		{"retention", "run", "a", "b"},
		{"retention", "run", "orders", "--partition", "-1"},
		{"retention", "run", "bad/name"},
	} {
		wantCode(t, ctl(t, addr, "", args...), 2)
	}
}

// With --bootstrap it asks the brokers hosting the topic's replicas, as
// the Metadata names them, and says which it could not ask.
func TestRetentionRunFindsBrokersThroughMetadata(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	b.view = func() core.MetadataView {
		return core.MetadataView{BrokerID: 1, ControllerID: -1, Brokers: []core.Broker{{ID: 1, Host: host, Port: int32(p)}},
			Topics: []core.TopicMetadata{{Topic: "orders", Partitions: []core.PartitionMetadata{
				{Partition: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1}, OfflineReplicas: []int32{2}}}}}}
	}
	for _, v := range []string{"a", "b"} {
		wantCode(t, ctl(t, addr, "", "produce", "--topic", "orders", "--partition", "0", "--value", v), 0)
	}
	r := ctl(t, addr, "", "--bootstrap", addr, "retention", "run", "orders")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "0 -> 1") || !strings.Contains(r.stderr, "broker(s) 2 not live: not asked") {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = ctl(t, addr, "", "--bootstrap", addr, "retention", "run", "orders", "--partition", "3")
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, "no partition 3") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestRetentionTimesLine(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	ms := func(d time.Duration) int64 { return now.Add(d).UnixMilli() }
	for _, tc := range []struct {
		last, next int64
		want       string
	}{
		{0, 0, ""},
		{ms(-12 * time.Second), ms(4*time.Minute + 48*time.Second), "retention: last check 12s ago, next in 4m48s"},
		{0, ms(5 * time.Minute), "retention: no check yet, next in 5m0s"},
		{ms(-5 * time.Minute), ms(-time.Second), "retention: last check 5m0s ago, next due now"},
	} {
		if got := retentionTimesLine(now, tc.last, tc.next); got != tc.want {
			t.Errorf("last %d next %d: %q, want %q", tc.last, tc.next, got, tc.want)
		}
	}
}
