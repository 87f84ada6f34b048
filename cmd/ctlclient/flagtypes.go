package main

import (
	"flag"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/flagfile"
)

// int32Flag is an int32 flag; wider values are refused at parse time.
type int32Flag int32

func (f *int32Flag) String() string { return strconv.Itoa(int(*f)) }
func (f *int32Flag) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return fmt.Errorf("want a 32-bit integer")
	}
	*f = int32Flag(v)
	return nil
}

func int32Var(fs *flag.FlagSet, name string, def int32, usage string) *int32 {
	f := int32Flag(def)
	fs.Var(&f, name, usage)
	return (*int32)(&f)
}

// int32List is a comma-separated list of broker ids: 1,2,3.
type int32List []int32

func (l *int32List) String() string { return joinInt32s(*l) }
func (l *int32List) Set(s string) error {
	*l = nil
	if s == "" {
		return nil
	}
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(part), 10, 32)
		if err != nil {
			return fmt.Errorf("want comma-separated broker ids like 1,2,3 (bad %q)", part)
		}
		*l = append(*l, int32(v))
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// brokerList is a repeatable ID=HOST:PORT flag.
type brokerList []*replicadv1.Broker

func (l *brokerList) String() string {
	parts := make([]string, len(*l))
	for i, b := range *l {
		parts[i] = fmt.Sprintf("%d=%s", b.GetId(), net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort()))))
	}
	return strings.Join(parts, " ")
}

func (l *brokerList) Set(s string) error {
	id, addr, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("want ID=HOST:PORT (got %q)", s)
	}
	bid, err := strconv.ParseInt(id, 10, 32)
	if err != nil {
		return fmt.Errorf("want ID=HOST:PORT with a numeric ID (got %q)", s)
	}
	if err := flagfile.CheckAddress(addr, "127.0.0.1:9091", false); err != nil {
		return fmt.Errorf("want ID=HOST:PORT (got %q): %v", s, err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want ID=HOST:PORT (got %q): %v", s, err)
	}
	p, err := strconv.ParseInt(port, 10, 32)
	if err != nil {
		return fmt.Errorf("want ID=HOST:PORT with a numeric PORT (got %q)", s)
	}
	*l = append(*l, &replicadv1.Broker{Id: int32(bid), Host: host, Port: int32(p)})
	return nil
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// requireFlags fails naming every required flag that is missing.
func requireFlags(fs *flag.FlagSet, names ...string) error {
	set := setFlags(fs)
	var missing []string
	for _, n := range names {
		if !set[n] {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return usagef("missing %s", strings.Join(missing, ", "))
	}
	return nil
}

// forbidFlags fails when any of names was given (flags that contradict another).
func forbidFlags(fs *flag.FlagSet, why string, names ...string) error {
	set := setFlags(fs)
	var bad []string
	for _, n := range names {
		if set[n] {
			bad = append(bad, "--"+n)
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		return usagef("%s cannot be combined with %s", strings.Join(bad, ", "), why)
	}
	return nil
}

// parseAcks accepts Kafka's spellings: all (= -1), -1, 1, 0.
func parseAcks(s string) (int32, error) {
	switch s {
	case "all", "-1":
		return -1, nil
	case "1":
		return 1, nil
	case "0":
		return 0, nil
	}
	return 0, usagef("--acks: want all, -1, 1 or 0 (got %q)", s)
}
