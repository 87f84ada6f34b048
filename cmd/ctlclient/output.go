package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func (e *env) jsonOutput() bool { return e.g.output == "json" }

// printJSON prints m as protojson does: lowerCamelCase names (the casing of
// every JSON ctlclient prints), int64 as strings, enums by name, two-space
// indent, and every field, zero values included (partition 0, errorCode
// "ERROR_CODE_NONE", empty lists), so that jq filters such as
// select(.partition == 0) find what they look for. protojson deliberately
// varies its whitespace between builds, so its compact form is re-indented
// by encoding/json to give the same bytes every time.
func (e *env) printJSON(m proto.Message) error {
	compact, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		return fmt.Errorf("indent json: %w", err)
	}
	out.WriteByte('\n')
	_, err = e.stdout.Write(out.Bytes())
	return err
}

// table writes aligned columns; call flush when done.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)}
	t.row(anySlice(header)...)
	return t
}

func anySlice(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func (t *table) row(cells ...any) {
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprint(c)
	}
	fmt.Fprintln(t.tw, strings.Join(parts, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// codeName is an error code's Kafka name: NONE, NOT_LEADER_OR_FOLLOWER, ...
func codeName(c replicadv1.ErrorCode) string {
	return strings.TrimPrefix(c.String(), "ERROR_CODE_")
}

func roleName(r replicadv1.ReplicaRole) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "REPLICA_ROLE_"))
}

func joinInt32s(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(int(id))
	}
	return strings.Join(parts, ",")
}

// interruptedError: the user interrupted a wait (Ctrl-C) for work that
// goes on without ctlclient; the message says how to follow or undo it.
// Exit status 130.
type interruptedError struct{ msg string }

func (i interruptedError) Error() string { return i.msg }

// answerError is an OK RPC whose answer carried error codes.
type answerError struct{ msg string }

func (a answerError) Error() string { return a.msg }

// checkPartitionErrors turns non-NONE codes into an error listing them,
// with the answer's error message (why it was refused as a whole), if any.
func checkPartitionErrors(rpc string, top replicadv1.ErrorCode, message string, errs []*replicadv1.PartitionError) error {
	var bad []string
	if top != replicadv1.ErrorCode_ERROR_CODE_NONE {
		bad = append(bad, codeName(top))
		if message != "" {
			return answerError{fmt.Sprintf("%s: %s: %s", rpc, codeName(top), message)}
		}
	}
	for _, pe := range errs {
		if pe.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			bad = append(bad, fmt.Sprintf("%s-%d %s", pe.GetTopic(), pe.GetPartition(), codeName(pe.GetErrorCode())))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return answerError{fmt.Sprintf("%s: %s", rpc, strings.Join(bad, ", "))}
}

// printPartitionErrors is the table of a batch response.
func printPartitionErrors(w io.Writer, top replicadv1.ErrorCode, errs []*replicadv1.PartitionError) error {
	if top != replicadv1.ErrorCode_ERROR_CODE_NONE {
		fmt.Fprintf(w, "ERROR %s\n", codeName(top))
	}
	t := newTable(w, "TOPIC", "PARTITION", "ERROR")
	for _, pe := range errs {
		t.row(pe.GetTopic(), pe.GetPartition(), codeName(pe.GetErrorCode()))
	}
	return t.flush()
}

// printPartitionErrorsResponse prints a batch response as json or as a table.
func (e *env) printPartitionErrorsResponse(resp proto.Message, top replicadv1.ErrorCode, errs []*replicadv1.PartitionError) error {
	if e.jsonOutput() {
		return e.printJSON(resp)
	}
	return printPartitionErrors(e.stdout, top, errs)
}
