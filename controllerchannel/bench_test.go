package controllerchannel

import (
	"context"
	"testing"
)

// The channel's cost per request over a bare client, on loopback: a
// heartbeat through Attempt and Call against the same call made directly.
// Run alternating: go test ./controllerchannel -run '^$' -bench 'Heartbeat' -count 1 (several times).

func benchHeartbeat(b *testing.B, via func(context.Context, *Channel) error) {
	f := &fakeController{active: true}
	ch, stop := benchChannel(b, f)
	defer stop()
	ctx := context.Background()
	if err := via(ctx, ch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := via(ctx, ch); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHeartbeatDirect(b *testing.B) {
	benchHeartbeat(b, func(ctx context.Context, ch *Channel) error {
		c, err := ch.Client(ch.Target())
		if err != nil {
			return err
		}
		_, err = heartbeat(ctx, c)
		return err
	})
}

func BenchmarkHeartbeatAttempt(b *testing.B) {
	benchHeartbeat(b, func(ctx context.Context, ch *Channel) error {
		_, _, err := Attempt(ctx, ch, AttemptOptions{AbortOnMove: true}, heartbeat)
		return err
	})
}

func BenchmarkHeartbeatCall(b *testing.B) {
	benchHeartbeat(b, func(ctx context.Context, ch *Channel) error {
		_, err := Call(ctx, ch, Policy{Rounds: 1, Idempotent: true}, heartbeat)
		return err
	})
}
