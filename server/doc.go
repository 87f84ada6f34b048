// Package server assembles the processes of a cluster, as Kafka's
// BrokerServer and ControllerServer or etcd's embed package do: the one
// place where the components are wired together, used by the daemon
// (cmd/replicad, and `ctlclient controller run`), by the integration tests
// through that binary, and by the simulation (tests/sim), so that what the
// simulation tests is the broker that ships.
//
// Broker is a broker process: the replica manager (core) and its log
// dirs, the fetchers and the alter-log-dirs fetchers, the clients of the
// controller (the broker session, AlterPartition, producer IDs), the gRPC
// services (package service), metrics (server/metrics), telemetry and
// authorization. BrokerConfig carries the validated settings and the
// injection points a harness replaces: the clock, the file system, the
// network (how the broker is served and how it dials the controller and
// its leaders), the tracer provider and the sources of jitter. Their zero
// values are what ships.
//
// RunController is a controller process around controller.Controller (the
// store, the election, the gRPC server, telemetry, metrics, the clean
// stop), with its flags (ControllerConfig.RegisterFlags): two commands run
// it with the same flags and the same behaviour, `replicad controller`
// (the server binary runs the controller, as Kafka 4 does with
// process.roles) and its older alias `ctlclient controller run`. Each adds
// its own --tls-* flags (ctlclient's global ones, replicad's REPLICAD_TLS_*
// defaults) and fills ControllerConfig.TLS before calling RunController.
//
// The flags of the broker stay with cmd/replicad, which turns them into a
// BrokerConfig; process-wide settings (signals, the Go runtime's GC and
// memory limit, the stderr writer) stay there too.
package server
