package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/replicad/replicad/internal/tlsconf"
)

func certsInitCommand() *command {
	return &command{
		name:    "certs init",
		summary: "make development TLS certificates (a CA, a controller, brokers, an admin, a client)",
		usage:   "--dir DIR [--brokers 3] [--client-name default] [--force]",
		details: `For development and tests only: the CA key sits next to the certificates,
unprotected. Production certificates come from your own CA.

Writes into DIR, with Go's crypto/x509 (ECDSA P-256): a CA (ca.crt, ca.key,
valid 10 years) and leaves it signs, valid a year, each usable as server and
as client certificate, valid for the hosts localhost, 127.0.0.1 and ::1, and
naming its role in a SPIFFE URI SAN (what authorization will key on):

  controller.crt/.key   spiffe://replicad/controller
  broker-N.crt/.key     spiffe://replicad/broker/N, N = 1..--brokers
  admin.crt/.key        spiffe://replicad/admin
  client.crt/.key       spiffe://replicad/client/NAME (--client-name)

Keys are mode 0600. Without --force an existing file stops it before it
writes anything. Brokers on other hosts than loopback need certificates
naming those hosts.`,
		example: "ctlclient certs init --dir ./certs --brokers 3\n" +
			"ctlclient controller run --tls-cert certs/controller.crt --tls-key certs/controller.key --tls-ca certs/ca.crt --tls-client-auth require\n" +
			"replicad --id 1 --controller 127.0.0.1:9090 --tls-cert certs/broker-1.crt --tls-key certs/broker-1.key --tls-ca certs/ca.crt --tls-client-auth require",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			dir := fs.String("dir", "", "`DIR` to write the certificates and keys in (created)")
			brokers := fs.Int("brokers", 3, "how many broker certificates (broker-1 .. broker-N)")
			client := fs.String("client-name", "default", "`NAME` in client.crt's identity spiffe://replicad/client/NAME")
			force := fs.Bool("force", false, "overwrite existing files")
			return func(_ context.Context, e *env) error {
				if *dir == "" {
					return usagef("--dir is required")
				}
				if *brokers < 0 || *brokers > 1000 {
					return usagef("--brokers: want 0..1000 (got %d)", *brokers)
				}
				if *client == "" {
					return usagef("--client-name: must not be empty")
				}
				files, err := tlsconf.WriteDevCerts(tlsconf.DevCertsOptions{Dir: *dir, Brokers: *brokers, ClientName: *client, Force: *force})
				if errors.Is(err, tlsconf.ErrExists) {
					return usagef("%v", err)
				}
				if err != nil {
					return err
				}
				for _, f := range files {
					fmt.Fprintln(e.stdout, f)
				}
				fmt.Fprintf(e.stderr, "wrote a development CA and %d certificates in %s (for development only)\n", len(files)/2-1, *dir)
				return nil
			}
		},
	}
}
