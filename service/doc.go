// Package service is replicad's gRPC surface: the handlers of
// ReplicaManagerService, LogService and FetchService (the leader side of
// replication: one bidi Fetch stream per follower fetcher, answered in
// order, see fetch.go), and the server that hosts them with
// reflection, health, logging, panic recovery and OpenTelemetry tracing.
//
// Handlers are thin. Each one validates the whole request first (a malformed
// request gets codes.InvalidArgument naming the offending field, and nothing
// is changed), translates it to the core types (package protoconv), calls the
// replica manager, and translates the answer back. Protocol outcomes
// (STALE_CONTROLLER_EPOCH, NOT_LEADER_OR_FOLLOWER, ...) travel as error codes
// inside OK responses, as Kafka's do.
//
// InitProducerId (producer_ids.go) hands idempotent producers their IDs
// through Options.ProducerIDs (the broker's producerid.Manager, which asks
// the controller); Produce carries the producer fields into core in a
// format-v1 batch.
//
// The handlers depend on the ReplicaManager interface declared here rather
// than on *core.ReplicaManager, so they can be tested with a fake.
//
// Usage:
//
//	srv := service.NewServer(service.Options{ReplicaManager: rm, Logger: logger})
//	go srv.Serve(lis)
//	...
//	srv.Shutdown(ctx) // health NOT_SERVING, GracefulStop bounded by ctx, then Stop
package service
