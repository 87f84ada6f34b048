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
