package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"strings"

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

func certsIssueCommand() *command {
	return &command{
		name:    "certs issue",
		summary: "sign one more certificate with an existing CA (a second client identity, a new broker)",
		usage:   "--dir DIR --name NAME [--role client|admin|broker|controller] [--broker-id N] [--hosts H,H...] [--out DIR] [--force]",
		details: `Signs a new certificate and key with the CA in DIR (ca.crt and ca.key, as
'certs init' writes them), without openssl. The CA files are only read:
everything it signed before stays valid. Writes NAME.crt and NAME.key (mode
0600) into --out (default DIR); without --force an existing one stops it.

The identity follows --role:

  client      spiffe://replicad/client/NAME   (default)
  admin       spiffe://replicad/admin
  broker      spiffe://replicad/broker/N      (--broker-id N)
  controller  spiffe://replicad/controller

Valid a year (never past the CA's expiry) for --hosts (default localhost,
127.0.0.1 and ::1). For development and tests, like certs init.`,
		example: "ctlclient certs issue --dir ./certs --name analytics\n" +
			"ctlclient --bootstrap 127.0.0.1:9091 --tls-cert certs/analytics.crt --tls-key certs/analytics.key --tls-ca certs/ca.crt consume orders --partition 0",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			dir := fs.String("dir", "", "`DIR` holding ca.crt and ca.key")
			name := fs.String("name", "", "`NAME` of the files NAME.crt and NAME.key, and of the client identity")
			role := fs.String("role", "client", "identity: client, admin, broker or controller")
			brokerID := fs.Int("broker-id", -1, "broker id `N` of a --role broker certificate")
			hosts := fs.String("hosts", "", "comma-separated host names and IP addresses it is valid for (default localhost,127.0.0.1,::1)")
			out := fs.String("out", "", "`DIR` to write into (default --dir)")
			force := fs.Bool("force", false, "overwrite NAME.crt and NAME.key")
			return func(_ context.Context, e *env) error {
				if *dir == "" {
					return usagef("--dir is required (the directory certs init wrote)")
				}
				if *name == "" {
					return usagef("--name is required")
				}
				if *name == "ca" || *name != filepath.Base(*name) || strings.ContainsAny(*name, "/\\") || strings.HasPrefix(*name, ".") {
					return usagef("--name %q: want a plain name other than ca (it names NAME.crt and NAME.key)", *name)
				}
				set := setFlags(fs)
				var principal string
				switch *role {
				case "client":
					principal = tlsconf.ClientPrincipal(*name)
				case "admin":
					principal = tlsconf.AdminPrincipal
				case "controller":
					principal = tlsconf.ControllerPrincipal
				case "broker":
					if *brokerID < 0 {
						return usagef("--role broker needs --broker-id N (its identity is spiffe://replicad/broker/N)")
					}
					principal = tlsconf.BrokerPrincipal(*brokerID)
				default:
					return usagef("--role %q: want client, admin, broker or controller", *role)
				}
				if set["broker-id"] && *role != "broker" {
					return usagef("--broker-id applies to --role broker only")
				}
				o := tlsconf.IssueOptions{Dir: *dir, OutDir: *out, Name: *name, Principal: principal, Force: *force}
				if *hosts != "" {
					for _, h := range strings.Split(*hosts, ",") {
						h = strings.TrimSpace(h)
						if h == "" {
							return usagef("--hosts %q: an empty host", *hosts)
						}
						if ip := net.ParseIP(h); ip != nil {
							o.IPs = append(o.IPs, ip)
						} else if strings.ContainsAny(h, ":/ ") {
							return usagef("--hosts: %q is neither a host name nor an IP address", h)
						} else {
							o.DNS = append(o.DNS, h)
						}
					}
				}
				files, err := tlsconf.IssueDevCert(o)
				switch {
				case errors.Is(err, tlsconf.ErrExists):
					return usagef("%v", err)
				case errors.Is(err, tlsconf.ErrNoCAKey):
					return fmt.Errorf("%v: certs issue signs with the CA's key, which must sit next to ca.crt in --dir (as certs init leaves it)", err)
				case err != nil:
					return err
				}
				for _, f := range files {
					fmt.Fprintln(e.stdout, f)
				}
				fmt.Fprintf(e.stderr, "signed %s for %s with the CA in %s (the CA is unchanged)\n", files[len(files)-1], principal, *dir)
				return nil
			}
		},
	}
}
