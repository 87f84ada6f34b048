// Package controllerchannel is the one way a replicad process reaches the
// active controller (Kafka's NodeToControllerChannelManager): the broker's
// session, its AlterPartition and producer ID managers, ctlclient and the
// chaos harness all go through it.
//
//	ch, err := controllerchannel.New(controllerchannel.Config{
//		Addrs:       []string{"10.0.0.1:9090", "10.0.0.2:9090"},
//		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(creds)},
//	})
//	resp, err := controllerchannel.Call(ctx, ch, controllerchannel.Policy{Rounds: 1, Idempotent: true},
//		func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.BrokerHeartbeatResponse, error) {
//			return c.BrokerHeartbeat(ctx, req)
//		})
//
// Several controllers share one store and one of them is active; the others
// answer NOT_CONTROLLER. A Channel keeps a client per address (dialed at
// first use, reconnecting as gRPC does) and a target: the address that last
// answered as active, or the next candidate after a failure. A standby that
// knows the active controller names it in its NOT_CONTROLLER answer (the
// gRPC trailer grpcx.ActiveControllerKey on every method, and "the active
// one is ADDR" in the admin methods' error message): the channel goes there
// next rather than down the list, when the address is one of its own (an
// address it was not given, such as a controller's own behind a proxy, is
// not followed). Use lets a caller that knows better (the broker session,
// for the other two managers) point the target; Subscribe hears each time
// another controller answers as active.
//
// The channel decides where a request goes; each caller keeps its own retry
// policy. Attempt sends one request and records where the next should go,
// for callers that retry on their own schedule (AlterPartition, producer
// IDs). Call goes around the addresses (Policy.Rounds times, or until ctx
// ends with a bounded backoff between rounds), and tells apart the two ways
// it can fail:
//
//   - ErrNoController (*NoControllerError): no address answered as active.
//     Without ErrMaybeApplied, no controller acted on the request: every
//     attempt was a standby's refusal or never left (no connection).
//   - ErrMaybeApplied: a request went out and no answer came back in time;
//     the controller may have applied it. A request that is not idempotent
//     (Policy.Idempotent false: creating a topic, bumping a producer epoch)
//     stops there with a *NoAnswerError rather than being sent again
//     elsewhere, so that the caller checks before retrying.
//
// Whether a timed-out request went out is known from DialOption's
// interceptor (gRPC fills a call's peer once it has a transport); a client
// without it (a test's in-memory network) counts every timeout as sent.
package controllerchannel
