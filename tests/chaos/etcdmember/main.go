// Command etcdmember runs one member of a real etcd cluster (etcd's embed
// package) as its own process, for the chaos test: as a process it can be
// paused (SIGSTOP), killed and restarted, and its connections told apart
// from the other members' by the test's fault-injecting proxy.
//
//	etcdmember --name e1 --dir DIR --listen-client URL --advertise-client URL \
//	    --listen-peer URL --advertise-peer URL --initial-cluster e1=URL,e2=URL,e3=URL
//
// It prints "etcd member ready on URL" (its client URL) once it serves, and
// stops on SIGTERM or SIGINT.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	name := flag.String("name", "", "member name")
	dir := flag.String("dir", "", "data dir (kept across restarts)")
	listenClient := flag.String("listen-client", "", "client URL to listen on")
	advertiseClient := flag.String("advertise-client", "", "client URL to advertise")
	listenPeer := flag.String("listen-peer", "", "peer URL to listen on")
	advertisePeer := flag.String("advertise-peer", "", "peer URL to advertise (what the other members dial)")
	initial := flag.String("initial-cluster", "", "name=peerURL,... of every member")
	flag.Parse()
	parse := func(flagName, s string) url.URL {
		u, err := url.Parse(s)
		if err != nil || s == "" {
			fmt.Fprintf(os.Stderr, "etcdmember: --%s: %q is not a URL\n", flagName, s)
			os.Exit(2)
		}
		return *u
	}
	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dir
	cfg.LogLevel = "warn"
	cfg.ListenClientUrls = []url.URL{parse("listen-client", *listenClient)}
	cfg.AdvertiseClientUrls = []url.URL{parse("advertise-client", *advertiseClient)}
	cfg.ListenPeerUrls = []url.URL{parse("listen-peer", *listenPeer)}
	cfg.AdvertisePeerUrls = []url.URL{parse("advertise-peer", *advertisePeer)}
	cfg.InitialCluster = *initial
	cfg.InitialClusterToken = "replicad-chaos"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcdmember: start: %v\n", err)
		os.Exit(1)
	}
	defer e.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd member ready on %s\n", *advertiseClient)
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcdmember: %v\n", err)
		os.Exit(1)
	case <-time.After(2 * time.Minute):
		fmt.Fprintln(os.Stderr, "etcdmember: not ready within 2m")
		os.Exit(1)
	case <-stop:
		return
	}
	select {
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcdmember: %v\n", err)
		os.Exit(1)
	case <-stop:
	}
}
