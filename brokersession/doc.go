// Package brokersession is a broker's session with the controller (the broker
// side of Kafka's broker registration, heartbeats and controlled shutdown).
//
//	s, err := brokersession.Start(ctx, brokersession.Config{
//		Controllers: []string{"10.0.0.1:9090", "10.0.0.2:9090"},
//		BrokerID:    1,
//		Host:        "10.0.0.5", Port: 9091, // what other brokers dial
//		LogDirs:     dirs,
//		Logger:      logger,
//	})
//	epoch := s.BrokerEpoch() // for fetch requests and AlterPartition
//	...
//	err = s.ControlledShutdown(shutdownCtx) // on SIGTERM, before stopping
//	s.Close()
//
// Start registers the broker (RegisterBroker, with an incarnation id drawn
// once per Session, so the controller tells a restart from a retry), retrying
// with jittered exponential backoff until a controller accepts it or ctx is
// done. ctx bounds only that first registration: the session then lives
// until Close.
//
// One goroutine heartbeats every session timeout / 3 (the timeout comes from
// the controller's registration answer; at least every 50ms). When the
// controller answers that the broker is fenced, or that its broker epoch is
// stale (the controller lost or replaced the registration), the goroutine
// registers again and BrokerEpoch moves to the new epoch; until then the old
// one stays. Requests meant for the old epoch are fenced by the broker itself
// (core.Config.BrokerEpoch).
//
// Config.Controllers lists every controller that may be active; the session
// reaches them through a controllerchannel. Each call goes to the one that
// last answered; on NOT_CONTROLLER it moves on to the controller the standby
// named (when it is one of the addresses) or the next address, and on a
// transport error to the next, once around the list per attempt. So the
// session finds the active one without being told.
// Config.OnControllerChange hears where it went.
//
// ControlledShutdown asks the controller to move this broker's leaderships
// away and repeats (about every 200ms) until none is left or ctx is done.
package brokersession
