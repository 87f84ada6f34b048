// Package flagfile applies a YAML configuration file to a flag.FlagSet:
// the daemons' --config FILE. The file maps one to one onto the flags, each
// key a flag name, so there is one vocabulary to learn and one set of checks:
// a value goes through the flag's own Set, then through the same
// validation as the command line. Flags given on the command line win over
// the file (a file is the deployment's baseline, a flag the operator's
// override), and the file wins over the environment variables that only
// supply defaults (REPLICAD_TLS_*). An unknown key is an error naming it and
// its line: a misspelt key silently ignored is a setting silently lost.
//
// A list is a repeatable flag given once per item (tls-principal-rule), or,
// for any other flag, its comma-separated form (log-dirs: [/a, /b]).
//
// It also holds the checks every command line shares, in both binaries
// (replicad and ctlclient), so a mistake reads the same everywhere:
// ParseFlags explains a duration without a unit ("did you mean 5s?"), on
// the command line and in a file; Address and AddressList refuse an
// address without a port or with a scheme before anything is dialed.
package flagfile
