package main

import (
	"bytes"
	"strings"
	"testing"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// A replica whose log is damaged at rest says so in describe's table, with
// where its sound part ends; a sound one says nothing.
func TestDescribeShowsADamagedLog(t *testing.T) {
	var out bytes.Buffer
	at := int64(5)
	resp := &replicadv1.DescribePartitionsResponse{Partitions: []*replicadv1.PartitionDescription{
		{Topic: "x", Partition: 0, LogDir: "/d", DamagedOffset: &at},
		{Topic: "x", Partition: 1, LogDir: "/d"},
	}}
	if err := printDescription(&env{stdout: &out}, resp); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], "DAMAGED at 5") || strings.Contains(lines[2], "DAMAGED") {
		t.Fatalf("describe:\n%s\nwant x-0 marked damaged at 5, x-1 not", out.String())
	}
}

// describe counts each replica's idempotent producers, and --producers
// lists them.
func TestDescribeShowsProducers(t *testing.T) {
	var out bytes.Buffer
	resp := &replicadv1.DescribePartitionsResponse{Partitions: []*replicadv1.PartitionDescription{
		{Topic: "x", Partition: 0, LogDir: "/d", ProducerCount: 1, Producers: []*replicadv1.ProducerStateDescription{
			{ProducerId: 1001, ProducerEpoch: 2, LastSequence: 41, LastOffset: 99, LastTimestampMs: 1_700_000_000_000}}},
	}}
	e := &env{stdout: &out}
	if err := printDescription(e, resp); err != nil {
		t.Fatal(err)
	}
	if err := printProducers(e, resp); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "PRODUCERS") || !strings.Contains(out.String(), "PRODUCER-ID") {
		t.Fatalf("describe:\n%s\nwant a PRODUCERS column and a producer table", out.String())
	}
	for _, want := range []string{"1001", "41", "99", "2023-11-14T22:13:20Z"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("describe --producers lacks %q:\n%s", want, out.String())
		}
	}
}
