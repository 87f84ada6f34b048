// Package brokerqueue is the controller's per-broker request queue (Kafka's
// ControllerChannelManager with one RequestSendThread per broker). It carries
// the controller's LeaderAndIsr, UpdateMetadata and StopReplica requests to
// one broker:
//
//	q := brokerqueue.New(brokerqueue.Config{
//		BrokerID:        2,
//		BrokerEpoch:     brokerEpoch, // from the broker's registration
//		ControllerID:    1,
//		ControllerEpoch: controllerEpoch,
//		Client:          replicadv1.NewReplicaManagerServiceClient(conn),
//		OnLeaderAndIsrResponse: func(broker int32, resp *replicadv1.LeaderAndIsrResponse) { ... },
//		OnStaleControllerEpoch: func() { go controller.resign() },
//		Logger:          logger,
//	})
//	q.LeaderAndIsrContext(ctx, states, liveLeaders) // ctx: the decision's span
//	...
//	q.Close()
//
// A Queue belongs to one (controller epoch, broker incarnation): its
// controller id, controller epoch and broker epoch are fixed and stamped on
// every request it sends. When the broker registers again (a new broker
// epoch) or the controller is re-elected, the controller closes the queue and
// makes a new one.
//
// # Sending
//
// One goroutine per Queue sends, one request at a time, in the order the
// calls were made. The enqueueing methods only take a mutex and append: they
// never wait for the network, so a slow or dead broker holds up neither the
// caller nor the queues of other brokers.
//
// # Batching
//
// Calls of the same kind that wait next to each other become one request:
// consecutive LeaderAndIsr calls merge (a later state of a topic-partition
// replaces the earlier one in place, live leaders merge by broker id, the
// later endpoint winning), consecutive UpdateMetadata calls merge (partition
// states as for LeaderAndIsr, the latest live-broker list wins) and
// consecutive StopReplica calls merge (the latest leader epoch of a
// partition wins; delete_partition, once asked, stays asked, as in Kafka's
// ControllerBrokerRequestBatch). Requests of different kinds are never
// merged, so a StopReplica and a LeaderAndIsr of one partition reach the
// broker in the order they were made. A request holds at most
// Config.MaxPartitionsPerRequest partitions; a larger call is split, in
// order. A request in flight is never changed: calls made meanwhile wait and
// go in the next request.
//
// # Failures
//
//   - A transport error or any gRPC status other than InvalidArgument (the
//     broker down, UNAVAILABLE, a call over its deadline, which is
//     Config.RequestTimeout plus RequestTimeoutPerPartition for each of its
//     partitions, ...):
//     the same request is sent again after a backoff that doubles from
//     Config.Backoff to Config.MaxBackoff, less a random part of up to half,
//     for as long as the Queue is open. Calls of the same kind made during
//     the backoff join the waiting request when nothing of another kind
//     waits between them. The first failure is logged at warn, the
//     following ones at most once per 5 seconds.
//   - gRPC InvalidArgument is a bug in the controller: logged at error with
//     the broker's message, and the request is dropped.
//   - Top-level STALE_CONTROLLER_EPOCH in an answer: this controller has been
//     deposed. The Queue stops sending for good, drops what waits, and calls
//     Config.OnStaleControllerEpoch once.
//   - Top-level STALE_BROKER_EPOCH: the broker restarted since this Queue was
//     made. Logged at warn and the request dropped; the controller makes a
//     new queue when the broker registers again.
//   - Per-partition errors in an answer are the controller's business: a
//     LeaderAndIsr answer goes to Config.OnLeaderAndIsrResponse, and non-NONE
//     partition errors are logged at debug (FENCED_LEADER_EPOCH or
//     STALE_CONTROLLER_EPOCH on an epoch the broker already applied is normal
//     after a controller failover).
//
// Flush waits until every call made before it was answered successfully and
// reports the calls dropped (ErrDropped); Close stops the goroutine and drops
// what was not sent.
//
// # Tracing
//
// LeaderAndIsrContext, UpdateMetadataContext and StopReplicaContext keep the
// span context of their ctx (not ctx itself: a call outlives the caller's
// deadline). Each attempt to send a request runs in a client span
// SendSpanName ("ControllerChannel.send", attributes replicad.broker,
// replicad.request_kind, replicad.partitions, replicad.merged_calls,
// replicad.attempt, the epochs, and replicad.error_code once answered) whose
// parent is the span of the first traced call merged into the request, so
// the request, and the broker's handling of it (the gRPC client propagates
// the context), land in the trace of the decision that queued it. The
// other calls merged into it are span links (at most MaxLinks), and while
// the send span records each linked call gets a MergedSpanName span in its
// own trace, linking back to the send, so every decision's trace shows what
// was sent for it. The methods
// without Context queue outside any trace.
package brokerqueue
