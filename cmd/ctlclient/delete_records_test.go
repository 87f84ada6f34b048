package main

import (
	"strings"
	"testing"
)

// delete-records prints the low watermark the leader answers, exits 1 on
// an error code and 2 on a bad flag, before any call.
func TestDeleteRecordsCommand(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	for _, v := range []string{"a", "b", "c", "d"} {
		wantCode(t, ctl(t, addr, "", "produce", "--topic", "orders", "--partition", "0", "--value", v), 0)
	}
	r := ctl(t, addr, "", "delete-records", "--topic", "orders", "--partition", "0", "--offset", "2")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "orders-0: low watermark 2") {
		t.Fatalf("stdout %q", r.stdout)
	}
	r = ctl(t, addr, "", "-o", "json", "delete-records", "--topic", "orders", "--partition", "0", "--offset", "-1")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, `"lowWatermark": "4"`) && !strings.Contains(r.stdout, `"lowWatermark":"4"`) {
		t.Fatalf("-o json: %q, want the low watermark 4 (the HW)", r.stdout)
	}
	r = ctl(t, addr, "", "delete-records", "--topic", "orders", "--partition", "0", "--offset", "9")
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, "OFFSET_OUT_OF_RANGE") {
		t.Fatalf("stderr %q, want OFFSET_OUT_OF_RANGE", r.stderr)
	}
	for _, args := range [][]string{
		{"delete-records", "--topic", "orders", "--partition", "0"},
		{"delete-records", "--topic", "orders", "--partition", "0", "--offset", "-2"},
		{"delete-records", "--topic", "orders", "--partition", "0", "--offset", "1", "--wait", "0s"},
	} {
		wantCode(t, ctl(t, addr, "", args...), 2)
	}
}
