// Package alterpartition sends a leader's ISR changes to the controller as
// AlterPartition requests (Kafka's AlterPartitionManager). Its Manager is the
// core.IsrChanger of a broker started with --controller:
//
//	m, err := alterpartition.New(alterpartition.Config{
//		Controller:  "127.0.0.1:9090",
//		BrokerID:    1,
//		BrokerEpoch: func() int64 { return epoch.Load() },
//		Logger:      logger,
//	})
//	rm, err := core.NewReplicaManager(core.Config{..., IsrChanger: m})
//	...
//	defer m.Close()
//
// One goroutine sends. Changes submitted while a request is in flight wait
// and go together in the next one, at most one item per partition. Each
// change is answered from its partition's item in the response (or from the
// response's top-level error_code, which applies to all): NONE commits the
// ISR and partition epoch the controller answered; any other code goes to
// the Partition as the change's error, and the Partition decides (it resets
// to the committed ISR only when the controller says it did not apply the
// change, and otherwise keeps it pending until the controller's next
// LeaderAndIsr, or submits it again: see core's completeIsrChange). A
// transport failure (the controller unreachable, UNAVAILABLE, a deadline) is
// retried with jittered exponential backoff, bounded by Config.MaxBackoff,
// for as long as the Manager runs, as Kafka keeps retrying; the retry also
// carries changes submitted meanwhile. After a rejected request the next one
// waits a backoff too, so a controller refusing everything is not hammered.
//
// Close cancels the request in flight and fails every change it has not
// answered with BROKER_NOT_AVAILABLE; Submit after Close fails at once. A
// change failed this way may still have been committed by the controller, so
// Close belongs at the end of the broker's life, when nothing acts on the ISR
// any more (replicad closes it after the replica manager's shutdown); the
// controller's next LeaderAndIsr brings the truth.
package alterpartition
