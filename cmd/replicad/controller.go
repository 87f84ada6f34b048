package main

import (
	"github.com/rs/zerolog"

	"github.com/replicad/replicad/alterpartition"
	"github.com/replicad/replicad/core"
)

// newIsrChanger is the broker's core.IsrChanger: nil (core's standalone
// changer, which applies ISR changes itself) without --controller, and
// otherwise an AlterPartition client of the controller. closeChanger stops the
// client; it belongs after the replica manager's shutdown.
func newIsrChanger(cfg config, logger zerolog.Logger) (changer core.IsrChanger, closeChanger func(), err error) {
	if cfg.controller == "" {
		return nil, func() {}, nil
	}
	m, err := alterpartition.New(alterpartition.Config{
		Controller: cfg.controller,
		BrokerID:   cfg.brokerID,
		// Broker epoch 0 until the broker registers with the controller.
		BrokerEpoch: func() int64 { return 0 },
		Logger:      logger,
	})
	if err != nil {
		return nil, nil, err
	}
	logger.Warn().Str("controller", cfg.controller).
		Msg("ISR changes go to the controller as AlterPartition; broker registration and controller-driven LeaderAndIsr arrive with the controller")
	return m, func() { _ = m.Close() }, nil
}
