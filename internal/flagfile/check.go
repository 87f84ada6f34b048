package flagfile

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// ParseFlags is fs.Parse(args) with the mistakes of duration flags explained:
// "--timeout 5" fails with `invalid value "5" for flag -timeout: missing
// unit in duration; did you mean 5s?` rather than the flag package's bare
// "parse error". Every flag whose value is a time.Duration (flag.Getter) is
// covered, so a command that adds one gets the hint without doing anything.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	restore := hintDurations(fs)
	defer restore()
	// The usage printed by a failed parse or -help is printed with the
	// flags' own values back in place: flag.PrintDefaults names a
	// duration flag's argument "duration" only for its own type.
	usage := fs.Usage
	defer func() { fs.Usage = usage }()
	fs.Usage = func() {
		restore()
		if usage != nil {
			usage()
			return
		}
		if fs.Name() == "" {
			fmt.Fprintf(fs.Output(), "Usage:\n")
		} else {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
		}
		fs.PrintDefaults()
	}
	return fs.Parse(args)
}

// hintDurations wraps the Value of every duration flag of fs in one whose
// Set explains a bad value; the function returned puts the originals back
// (and may be called more than once).
func hintDurations(fs *flag.FlagSet) (restore func()) {
	saved := map[*flag.Flag]flag.Value{}
	fs.VisitAll(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok {
			if _, ok := g.Get().(time.Duration); ok {
				saved[f] = f.Value
				f.Value = durationHint{f.Value}
			}
		}
	})
	return func() {
		for f, v := range saved {
			f.Value = v
		}
		clear(saved)
	}
}

// durationHint is a duration flag's Value that says what is wrong with a
// value time.ParseDuration refuses.
type durationHint struct{ flag.Value }

func (d durationHint) Set(s string) error {
	if err := CheckDuration(s); err != nil {
		return err
	}
	return d.Value.Set(s)
}

// CheckDuration is nil when time.ParseDuration accepts s, and otherwise
// an error saying how to write it: a plain number gets its fix ("5" →
// "missing unit in duration; did you mean 5s?"), since a unitless number
// is the common mistake of an operator used to Kafka's *.ms settings or to
// tools that take seconds.
func CheckDuration(s string) error {
	if _, err := time.ParseDuration(s); err == nil {
		return nil
	}
	if _, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
		return fmt.Errorf("missing unit in duration; did you mean %ss?", strings.TrimSpace(s))
	}
	return fmt.Errorf("not a duration: want a number and a unit, e.g. 10s, 1m30s or 500ms (units ns, us, ms, s, m, h)")
}

// Address checks addr, the value of flag name (or one entry of its list),
// before anything is dialed or bound: a host:port with a numeric port and
// no scheme. listen allows port 0 (a free port) and an empty host (every
// interface); an address to dial needs a port in 1..65535. example is a
// valid value to show. The error names the flag and the entry, e.g.
// "--controller 127.0.0.1: missing port (want host:port, e.g.
// 127.0.0.1:9090)": gRPC would otherwise dial 127.0.0.1:443 and wait out
// the whole timeout, and a URL's "http" would be taken for a host.
func Address(name, addr, example string, listen bool) error {
	if addr == "" {
		return fmt.Errorf("--%s: empty address (want host:port, e.g. %s)", name, example)
	}
	if err := CheckAddress(addr, example, listen); err != nil {
		return fmt.Errorf("--%s %s: %w", name, addr, err)
	}
	return nil
}

// CheckAddress is Address's check without the flag's name, for a value
// inside another (ctlclient's --live-broker ID=HOST:PORT): e.g. "missing
// port (want host:port, e.g. 127.0.0.1:9090)".
func CheckAddress(addr, example string, listen bool) error {
	want := fmt.Sprintf("want host:port, e.g. %s", example)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s (%s)", fmt.Sprintf(format, args...), want)
	}
	if addr == "" {
		return fail("empty address")
	}
	if i := strings.Index(addr, "://"); i >= 0 {
		return fail("a scheme (%s://) is not allowed", addr[:i])
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var aerr *net.AddrError
		switch {
		case net.ParseIP(addr) != nil && strings.Contains(addr, ":"):
			return fail("missing port; an IPv6 host goes in brackets, as [::1]:9090")
		case errors.As(err, &aerr) && aerr.Err == "missing port in address":
			return fail("missing port")
		case errors.As(err, &aerr):
			return fail("%s", aerr.Err)
		}
		return fail("%v", err)
	}
	if port == "" {
		return fail("missing port")
	}
	p, err := strconv.Atoi(port)
	lo := 1
	if listen {
		lo = 0
	}
	if err != nil || p < lo || p > 65535 {
		return fail("port %q is not a number in %d..65535", port, lo)
	}
	if host == "" && !listen {
		return fail("missing host")
	}
	return nil
}

// AddressList checks every entry of a comma-separated list of addresses
// (see Address), skipping empty entries and spaces around commas, and
// returns the entries.
func AddressList(name, list, example string, listen bool) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if err := Address(name, a, example, listen); err != nil {
			return nil, err
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("--%s: no address in %q (want host:port[,host:port...], e.g. %s)", name, list, example)
	}
	return addrs, nil
}
