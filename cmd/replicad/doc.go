// Command replicad is the broker daemon (and, as `replicad controller`,
// the controller's): it parses the flags and the --config file into a
// server.BrokerConfig, sets up what belongs to the process (signals, the
// Go runtime's GC and memory limit, the stderr writer), and runs the
// broker package server assembles (server.Broker): it opens its log dirs,
// builds the replica manager and serves the gRPC services of package
// service.
//
// Exit status: 0 after SIGTERM/SIGINT once HWs are checkpointed and logs
// flushed; 1 when start-up fails (a log dir of another broker, say) or when
// no log dir is left online; 2 for bad flags. Run `replicad --help` for the flags.
package main
