// Package integration holds replicad's integration tests: TestMain builds the real
// replicad and ctlclient binaries, and each test starts replicad processes
// on loopback port 0 and talks to them over real gRPC (or through ctlclient),
// crashing and restarting them to check what survives.
//
//	go test -race ./tests/integration/
package integration
