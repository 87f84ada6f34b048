package main

import (
	"context"
	"errors"
	"flag"

	"github.com/replicad/replicad/server"
)

// controllerRunCommand is the controller daemon under ctlclient: the alias,
// kept for existing scripts, of `replicad controller` (package server
// runs both). Its --tls-* are ctlclient's global flags.
func controllerRunCommand() *command {
	return &command{
		name:    "controller run",
		summary: "run the controller daemon (alias of replicad controller)",
		usage:   server.ControllerUsage,
		details: server.ControllerDetails + `

This is an alias of 'replicad controller', which takes the same flags (its
--tls-* default from REPLICAD_TLS_* instead of CTLCLIENT_TLS_*) and adds
--config FILE; new deployments should run that one.`,
		example: "ctlclient controller run --listen 127.0.0.1:9090 --store ./data/controller\n" +
			"ctlclient controller run --listen 127.0.0.1:9190 --store etcd://127.0.0.1:2379",
		daemon: true,
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			cfg := &server.ControllerConfig{}
			cfg.RegisterFlags(fs)
			return func(ctx context.Context, e *env) error {
				cfg.TLS = e.g.tls
				err := server.RunController(ctx, e.stderr, *cfg)
				var uerr server.UsageError
				if errors.As(err, &uerr) {
					return usagef("%s", uerr.Msg)
				}
				return err
			}
		},
	}
}
