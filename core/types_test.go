package core

import "testing"

// Broker.Addr writes host:port as net.JoinHostPort does (an IPv6 literal in
// brackets), without core importing net.
func TestBrokerAddrJoinsHostAndPort(t *testing.T) {
	for _, c := range []struct {
		host string
		port int32
		want string
	}{
		{"127.0.0.1", 9092, "127.0.0.1:9092"},
		{"broker-1.example", 9093, "broker-1.example:9093"},
		{"::1", 9092, "[::1]:9092"},
		{"fe80::1%eth0", 1, "[fe80::1%eth0]:1"},
		{"", 9092, ":9092"},
	} {
		if got := (Broker{Host: c.host, Port: c.port}).Addr(); got != c.want {
			t.Errorf("Broker{%q, %d}.Addr() = %q, want %q", c.host, c.port, got, c.want)
		}
	}
}
