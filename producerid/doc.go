// Package producerid is a broker's producer ID manager (Kafka's
// RPCProducerIdManager, KIP-730): it hands idempotent producers their IDs
// from a block the controller allocated, and forwards their epoch bumps to
// the controller. The broker's InitProducerId (package service) is its
// caller:
//
//	m, err := producerid.New(producerid.Config{
//		Controller:  "10.0.0.1:9090,10.0.0.2:9090",
//		BrokerID:    1,
//		BrokerEpoch: session.BrokerEpoch,
//		Logger:      logger,
//	})
//	id, err := m.NewProducerID(ctx)              // epoch 0
//	epoch, err := m.BumpEpoch(ctx, id, oldEpoch) // a restarted producer
//	...
//	m.Close()
//
// # Blocks
//
// The controller hands out blocks of IDs (AllocateProducerIds, 1000 IDs
// each) and records the end of each in its store before it answers, so a
// block is never handed out twice, also across controller failovers. The
// Manager hands the IDs of its block out in order, one per NewProducerID,
// and asks for the next block in the background once PrefetchRemaining or
// fewer are left (Kafka asks at 90% used), so a producer rarely waits on
// the controller. A NewProducerID that finds no ID left waits for the
// block being fetched, bounded by its context. The IDs left in a block
// when the broker stops are lost, never reused: the next block starts
// after the stored end.
//
// The block request goes to the controllers of Config.Controller through a
// controllerchannel, as AlterPartition's does: one that fails is left for
// the next, one that answers NOT_CONTROLLER for the controller it names (or
// the next); UseController points at the one the broker's session found
// active. It is retried with jittered
// exponential backoff until it succeeds or the Manager closes; a broker
// that is not registered yet (or whose epoch the controller no longer
// knows: STALE_BROKER_EPOCH) is answered once it is.
//
// # Epoch bumps
//
// BumpEpoch asks the controller for the epoch after the producer's
// (BumpProducerEpoch). The controller records the newest epoch handed out
// per ID, so two bumps from the same epoch never both succeed: the second
// gets INVALID_PRODUCER_EPOCH. A bump whose answer is lost (a timeout, a
// controller that failed over meanwhile) is sent again within the
// caller's deadline; if the first attempt had landed, the retry is
// refused INVALID_PRODUCER_EPOCH too, and the producer asks for a new ID:
// never do two instances share one epoch.
//
// # Tracing
//
// Each request to the controller is a ProducerIdManager.allocate or
// ProducerIdManager.bump client span (replicad.broker, replicad.producer_id,
// the answer's replicad.error_code), joined by the controller's
// Controller.allocateProducerIds or Controller.bumpProducerEpoch.
package producerid
