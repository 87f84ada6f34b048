package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/alterpartition"
	"github.com/replicad/replicad/brokersession"
	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/tlsconf"
	"github.com/replicad/replicad/producerid"
	"github.com/replicad/replicad/service"
)

// controllerLink is the broker's side of the controller protocol with
// --controller: the registration (made in the background once the gRPC
// server is up, since the controller sends LeaderAndIsr right after it), the
// session it yields, and the broker epoch everything else reads from it.
// Standalone, it is nil and all its methods do nothing.
type controllerLink struct {
	cfg    BrokerConfig
	logger zerolog.Logger
	tls    *tlsconf.TLS // nil: plaintext

	session atomic.Pointer[brokersession.Session] // set once registered
	cancel  context.CancelFunc                    // stops a registration in progress
	done    chan struct{}                         // closed when the registration goroutine ends
	// registered yields the registration's outcome once: nil, or why the
	// broker could not register.
	registered chan error
	closeOnce  sync.Once
	// onControllerChange hears which controller the session talks to (the
	// AlterPartition client follows it); set before start.
	onControllerChange func(addr string)
}

// brokerLife is what the broker's registrations tell the controller about
// its replicas, from the replica manager.
type brokerLife struct {
	// previousEpoch is the epoch of the broker's previous life if it lost
	// nothing, -1 otherwise.
	previousEpoch int64
	// offline lists the offline replicas, for every heartbeat.
	offline func() []tp.TopicPartition
	// registered records each registration's epoch durably.
	registered func(epoch int64) error
}

// followController has the session tell f which controller is active
// (alterpartition.Manager.UseController), so that ISR changes go where the
// heartbeats succeed. Call before start.
func (l *controllerLink) followController(f func(addr string)) {
	if l == nil || f == nil {
		return
	}
	if prev := l.onControllerChange; prev != nil {
		l.onControllerChange = func(addr string) { prev(addr); f(addr) }
		return
	}
	l.onControllerChange = f
}

func newControllerLink(cfg BrokerConfig, logger zerolog.Logger, tc *tlsconf.TLS) *controllerLink {
	if len(cfg.Controllers) == 0 {
		return nil
	}
	return &controllerLink{cfg: cfg, logger: logger, tls: tc}
}

// toController names the ends of the broker's channels to the controller
// in TLS errors.
var toController = tlsconf.Roles{Peer: "controller", Self: "this broker"}

// brokerEpoch is the current broker epoch: 0 until registered (and
// standalone). Safe from any goroutine.
func (l *controllerLink) brokerEpoch() int64 {
	if l == nil {
		return 0
	}
	if s := l.session.Load(); s != nil {
		return s.BrokerEpoch()
	}
	return 0
}

// brokerEpochFunc is what core, the fetchers and AlterPartition read the
// broker epoch through; nil standalone (core then checks no broker epoch).
func (l *controllerLink) brokerEpochFunc() func() int64 {
	if l == nil {
		return nil
	}
	return l.brokerEpoch
}

// start registers the broker in the background, advertising the endpoint
// derived from listenAddr (the address actually bound), until it succeeds or
// ctx is done. The outcome arrives on the returned channel (nil channel
// standalone). The session itself logs "registered broker_epoch=N".
func (l *controllerLink) start(ctx context.Context, listenAddr net.Addr, life brokerLife) <-chan error {
	if l == nil {
		return nil
	}
	host, port, err := advertisedEndpoint(l.cfg, listenAddr, l.logger)
	l.registered = make(chan error, 1)
	l.done = make(chan struct{})
	if err != nil {
		close(l.done)
		l.registered <- fmt.Errorf("--advertised-address: %w", err)
		return l.registered
	}
	l.logger.Info().Strs("controllers", l.cfg.Controllers).Str("advertised_address", net.JoinHostPort(host, strconv.Itoa(int(port)))).
		Msg("registering with the controller")
	ctx, l.cancel = context.WithCancel(ctx)
	go func() {
		defer close(l.done)
		s, err := brokersession.Start(ctx, brokersession.Config{
			Controllers: l.cfg.Controllers,
			BrokerID:    l.cfg.BrokerID,
			Host:        host,
			Port:        port,
			LogDirs:     l.cfg.LogDirs,
			Logger:      l.logger,
			// The session knows first when the active controller changes.
			OnControllerChange: l.onControllerChange,
			MinInsyncReplicas:  int32(l.cfg.MinInsyncReplicas),
			MaxPartitions:      int32(l.cfg.MaxPartitions),
			DialOptions:        l.tls.DialOptions(toController),
			// TLS on one side only: the broker exits rather than retry forever.
			Misconfigured:       tlsconf.IsMismatch,
			PreviousBrokerEpoch: life.previousEpoch,
			OfflinePartitions:   life.offline,
			OnRegistered: func(epoch int64) {
				if err := life.registered(epoch); err != nil {
					// The dir that failed goes offline; the broker goes on.
					l.logger.Error().Err(err).Int64("broker_epoch", epoch).Msg("record the broker epoch in the log dirs")
				}
			},
			Dial:          l.cfg.dialController("session"),
			Int64N:        l.cfg.Random.Int64N,
			IncarnationID: l.cfg.IncarnationID,
		})
		if err == nil {
			l.session.Store(s)
		}
		l.registered <- err
	}()
	return l.registered
}

// controlledShutdown asks the controller to move this broker's leaderships
// away, for at most --controlled-shutdown-timeout, and logs the outcome. A
// registration still in progress is abandoned (its context is the signal's,
// already done); there is nothing to move then.
func (l *controllerLink) controlledShutdown() {
	if l == nil || l.done == nil {
		return
	}
	if l.cancel != nil {
		l.cancel()
	}
	<-l.done
	s := l.session.Load()
	if s == nil {
		l.logger.Warn().Msg("not registered with the controller: no controlled shutdown")
		return
	}
	timeout := l.cfg.shutdownTimeout()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	began := time.Now()
	l.logger.Info().Dur("timeout_ms", timeout).Int64("broker_epoch", s.BrokerEpoch()).Msg("controlled shutdown: asking the controller to move leaderships away")
	if err := s.ControlledShutdown(ctx); err != nil {
		l.logger.Warn().Err(err).Dur("timeout_ms", timeout).Msg("controlled shutdown did not complete in time; shutting down anyway")
		return
	}
	l.logger.Info().Dur("took_ms", time.Since(began)).Msg("controlled shutdown complete: this broker leads no partition")
}

// close ends the registration or the session (the controller then fences
// the broker once its session times out). Idempotent.
func (l *controllerLink) close() {
	if l == nil || l.done == nil {
		return
	}
	l.closeOnce.Do(func() {
		if l.cancel != nil {
			l.cancel()
		}
		<-l.done
		if s := l.session.Load(); s != nil {
			s.Close()
		}
	})
}

// guard is the broker's service.ControllerGuard with a controller (the
// session decides who the broker follows), nil standalone.
func (l *controllerLink) guard() service.ControllerGuard {
	if l == nil {
		return nil
	}
	return service.SessionGuard(&l.session)
}

// advertisedEndpoint is the host and port the broker registers:
// --advertised-address, or else the listener's address, where a wildcard
// host (0.0.0.0, ::, empty) becomes this machine's hostname.
func advertisedEndpoint(cfg BrokerConfig, listenAddr net.Addr, logger zerolog.Logger) (string, int32, error) {
	addr := cfg.AdvertisedAddress
	if addr == "" {
		addr = listenAddr.String()
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, fmt.Errorf("port of %q: want 1..65535", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		name, err := os.Hostname()
		if err != nil || name == "" {
			return "", 0, errors.Join(fmt.Errorf("listening on a wildcard address %s and the hostname is unknown: set --advertised-address", addr), err)
		}
		logger.Warn().Str("listen", addr).Str("advertised_host", name).
			Msg("listening on a wildcard address: advertising the hostname; set --advertised-address to choose")
		host = name
	}
	return host, int32(port), nil
}

// newIsrChanger is the broker's core.IsrChanger: nil (core's standalone
// changer, which applies ISR changes itself) without --controller, and
// otherwise an AlterPartition client of the controllers (it moves on to the
// next address when one fails or answers NOT_CONTROLLER), which sends
// brokerEpoch. closeChanger stops the client; it belongs after the replica
// manager's shutdown.
//
// useController, nil standalone, points the client at the controller the
// broker's session found active.
func newIsrChanger(cfg BrokerConfig, logger zerolog.Logger, tc *tlsconf.TLS, brokerEpoch func() int64) (changer core.IsrChanger, useController func(string), closeChanger func(), err error) {
	controllers := cfg.Controllers
	if len(controllers) == 0 {
		return nil, nil, func() {}, nil
	}
	m, err := alterpartition.New(alterpartition.Config{
		Controller:  strings.Join(controllers, ","),
		BrokerID:    cfg.BrokerID,
		BrokerEpoch: brokerEpoch,
		Logger:      logger,
		DialOptions: tc.DialOptions(toController),
		Dial:        cfg.dialController("alterpartition"),
		Rand:        cfg.Random.AlterPartition,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return m, m.UseController, func() { _ = m.Close() }, nil
}

// newProducerIDs is the broker's producer ID manager for InitProducerId:
// nil without --controller (the service then refuses InitProducerId:
// producer IDs must be unique in the cluster, which only the controller's
// store can tell), otherwise a client of the controllers that asks for
// blocks of IDs with brokerEpoch. closeIDs stops it.
func newProducerIDs(cfg BrokerConfig, logger zerolog.Logger, tc *tlsconf.TLS, brokerEpoch func() int64) (ids service.ProducerIDs, useController func(string), closeIDs func(), err error) {
	controllers := cfg.Controllers
	if len(controllers) == 0 {
		return nil, nil, func() {}, nil
	}
	m, err := producerid.New(producerid.Config{
		Controller:  strings.Join(controllers, ","),
		BrokerID:    cfg.BrokerID,
		BrokerEpoch: brokerEpoch,
		Logger:      logger,
		DialOptions: tc.DialOptions(toController),
		Dial:        cfg.dialController("producerids"),
		Int64N:      cfg.Random.Int64N,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return m, m.UseController, func() { _ = m.Close() }, nil
}

// dialController is Network.DialController for purpose, nil (the
// clients' own gRPC dialer) without one.
func (c BrokerConfig) dialController(purpose string) func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
	dial := c.Network.DialController
	if dial == nil {
		return nil
	}
	return func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) { return dial(purpose, addr) }
}
