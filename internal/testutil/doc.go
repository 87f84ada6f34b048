// Package testutil runs real replicad processes for tests: it builds the
// binaries once (BuildBinaries, from TestMain), starts brokers on loopback
// port 0 and learns their address from the `replicad listening on` line
// (StartBroker), stops them with SIGTERM or SIGKILL, and waits on conditions
// with deadlines (Eventually) instead of sleeping.
package testutil
