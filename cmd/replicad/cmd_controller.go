package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/replicad/replicad/internal/flagfile"
	"github.com/replicad/replicad/internal/tlsconf"
	"github.com/replicad/replicad/internal/version"
	"github.com/replicad/replicad/server"
)

const controllerUsageHeader = `replicad controller: the controller daemon, from the server binary (as Kafka 4
runs its controller with process.roles=controller). 'ctlclient controller run'
is an alias taking the same flags.

Usage: replicad controller [flags]
       ` + server.ControllerUsage + `

`

const controllerUsageTLS = `

With --tls-cert and --tls-key the server and its channels to the brokers are
TLS 1.3 (the one certificate as server and client certificate); --tls-ca
verifies the peers; --tls-client-auth require makes it mutual TLS and turns
authorization on (--super-users, --tls-principal-rule, --no-authorization).
Their defaults come from REPLICAD_TLS_CERT, REPLICAD_TLS_KEY, REPLICAD_TLS_CA
and REPLICAD_TLS_CLIENT_AUTH.

Exit status: 0 after a clean stop (SIGTERM, Ctrl-C), 1 when it cannot start
or its server fails, 2 for a bad flag.

Flags:
`

// errShowVersion is --version: print the build instead of running.
var errShowVersion = errors.New("--version")

// parseControllerFlags parses and checks `replicad controller ARGS` (the
// file of --config included). It returns flag.ErrHelp for --help (usage
// printed) and errShowVersion for --version.
func parseControllerFlags(args []string, stderr io.Writer) (server.ControllerConfig, error) {
	fs := flag.NewFlagSet("replicad controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), controllerUsageHeader, server.ControllerDetails, controllerUsageTLS)
		fs.PrintDefaults()
	}
	var cfg server.ControllerConfig
	cfg.RegisterFlags(fs)
	tlsCert := fs.String("tls-cert", getenv("REPLICAD_TLS_CERT"), "PEM certificate `FILE` of the controller, as TLS server and as client of the brokers;\nenv REPLICAD_TLS_CERT. No --tls-* flag: plaintext")
	tlsKey := fs.String("tls-key", getenv("REPLICAD_TLS_KEY"), "PEM private key `FILE` of --tls-cert; env REPLICAD_TLS_KEY")
	tlsCA := fs.String("tls-ca", getenv("REPLICAD_TLS_CA"), "PEM CA bundle `FILE` verifying the brokers and (with --tls-client-auth) the clients; env REPLICAD_TLS_CA")
	tlsClientAuth := fs.String("tls-client-auth", getenvDefault("REPLICAD_TLS_CLIENT_AUTH", "none"), "client certificates the server asks for: none, request or require (mutual TLS);\nenv REPLICAD_TLS_CLIENT_AUTH")
	showVersion := fs.Bool("version", false, "print the version, commit and build date, and exit")
	configFile := fs.String("config", "", "YAML `FILE` of flag values, keys the flag names (store: /var/lib/replicad/controller);\nflags given on the command line override it, an unknown key is an error")
	if referenceFlags != nil {
		referenceFlags(fs)
		return cfg, flag.ErrHelp
	}
	if err := flagfile.ParseFlags(fs, args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q (replicad controller takes flags only)", fs.Arg(0))
	}
	if *showVersion {
		return cfg, errShowVersion
	}
	if *configFile != "" {
		if err := flagfile.Apply(fs, *configFile, configFileOptions); err != nil {
			return cfg, err
		}
	}
	cfg.TLS = tlsconf.Options{Cert: *tlsCert, Key: *tlsKey, CA: *tlsCA}
	var err error
	if cfg.TLS.ClientAuth, err = tlsconf.ParseClientAuth(*tlsClientAuth); err != nil {
		return cfg, fmt.Errorf("--tls-client-auth: %w", err)
	}
	if err := cfg.TLS.Validate(); err != nil {
		return cfg, err
	}
	cfg.Authz.MutualTLS = cfg.TLS.ClientAuth == tlsconf.ClientAuthRequire
	return cfg, cfg.Validate()
}

// runControllerCommand is `replicad controller ARGS`.
func runControllerCommand(args []string, stdout, stderr io.Writer) int {
	usageErr := func(err error) int {
		fmt.Fprintf(stderr, "replicad controller: %v\nRun 'replicad controller --help' for usage.\n", err)
		return 2
	}
	cfg, err := parseControllerFlags(args, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errShowVersion):
		fmt.Fprintln(stdout, version.Get().String("replicad"))
		return 0
	case err != nil:
		return usageErr(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = server.RunController(ctx, stderr, cfg)
	var uerr server.UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &uerr):
		return usageErr(err)
	}
	fmt.Fprintf(stderr, "replicad controller: %v\n", err)
	return 1
}
