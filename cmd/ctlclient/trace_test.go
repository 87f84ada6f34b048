package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// TestCommandTraceContextReachesBroker ensures each command sends a sampled
// W3C traceparent to the broker, so the broker's spans join the command's trace.
func TestCommandTraceContextReachesBroker(t *testing.T) {
	var mu sync.Mutex
	var traceparents []string
	capture := grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		mu.Lock()
		traceparents = append(traceparents, strings.Join(md.Get("traceparent"), ","))
		mu.Unlock()
		return h(ctx, req)
	})
	addr := startBroker(t, newMemBroker(), capture)
	wantCode(t, ctl(t, addr, "", "describe"), 0)
	wantCode(t, ctl(t, addr, "", "checkpoint"), 0)

	mu.Lock()
	defer mu.Unlock()
	if len(traceparents) != 2 {
		t.Fatalf("broker saw %d calls, want 2", len(traceparents))
	}
	for _, tp := range traceparents {
		// version-traceid-spanid-flags, flags 01 = sampled
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || len(parts[1]) != 32 || parts[3] != "01" {
			t.Fatalf("traceparent %q is not a sampled W3C trace context", tp)
		}
	}
	if traceparents[0][3:35] == traceparents[1][3:35] {
		t.Fatalf("two commands share trace id %s; each command should be its own root", traceparents[0][3:35])
	}
}
