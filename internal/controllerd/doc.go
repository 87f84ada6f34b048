// Package controllerd is the controller daemon: its flags, their checks,
// and the process around controller.Controller (the store, the election,
// the gRPC server, telemetry, the clean stop). Two commands run it with the
// same flags and the same behaviour: `replicad controller` (the server
// binary runs the controller, as Kafka 4 does with process.roles) and its
// older alias `ctlclient controller run`. Each adds its own --tls-* flags
// (ctlclient's global ones, replicad's REPLICAD_TLS_* defaults) and fills
// Config.TLS before calling Run.
package controllerd
