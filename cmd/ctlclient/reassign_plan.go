package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Reassignment plans in kafka-reassign-partitions' JSON format (the types
// and their logic are client's: client.ReassignPlan): here, reading them
// from --plan and printing them.

type (
	reassignPlan  = client.ReassignPlan
	planPartition = client.PlanPartition
	planProgress  = client.PlanProgress
)

// planJSON is the plan on one line, as Kafka prints it.
func planJSON(p reassignPlan) string {
	if p.Partitions == nil {
		p.Partitions = []planPartition{}
	}
	b, _ := json.Marshal(p) // plain structs: cannot fail
	return string(b)
}

// readPlan reads and parses a plan file (- for stdin). Unknown fields and
// a version other than 1 are refused: a typo must not turn into a partial
// plan.
func readPlan(path string, stdin io.Reader) (reassignPlan, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return reassignPlan{}, usagef("--plan: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p reassignPlan
	if err := dec.Decode(&p); err != nil {
		return reassignPlan{}, usagef("--plan %s: not a reassignment plan: %v", path, err)
	}
	if p.Version != client.PlanVersion {
		return reassignPlan{}, usagef("--plan %s: version %d, want %d", path, p.Version, client.PlanVersion)
	}
	if len(p.Partitions) == 0 {
		return reassignPlan{}, usagef("--plan %s: no partitions", path)
	}
	return p, nil
}

// partitionsOfTopics are the partitions of topics, sorted; an unknown
// topic is an error naming it.
func partitionsOfTopics(resp *replicadv1.DescribeClusterResponse, topics []string) ([]*replicadv1.ClusterPartition, error) {
	ix := client.IndexCluster(resp)
	var unknown []string
	for _, t := range topics {
		if !ix.Topics[t] {
			unknown = append(unknown, t)
		}
	}
	if len(unknown) > 0 {
		return nil, answerError{fmt.Sprintf("reassign --generate: unknown topic(s) %s", strings.Join(unknown, ", "))}
	}
	var out []*replicadv1.ClusterPartition
	for _, p := range resp.GetPartitions() {
		if slices.Contains(topics, p.GetTopic()) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *replicadv1.ClusterPartition) int {
		return cmp.Or(cmp.Compare(a.GetTopic(), b.GetTopic()), cmp.Compare(a.GetPartition(), b.GetPartition()))
	})
	return out, nil
}

// errIncomplete is --verify's and --wait's failure when a move is not done.
var errIncomplete = errors.New("not every reassignment of the plan is complete")
