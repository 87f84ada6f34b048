// Package topicconfig is a topic's configuration (Kafka's LogConfig, the
// topic-level part): the keys a topic may override (retention.ms,
// retention.bytes, segment.bytes, segment.ms, min.insync.replicas,
// cleanup.policy), how each is validated, and how a topic's overrides sit
// on top of a broker's defaults.
//
// The controller validates and stores the overrides; the brokers get them
// with each partition's state and apply them over their own flags. An
// override set is a plain map of Kafka's names to their string values, so
// that what an operator types (`--config retention.ms=3600000`) is what is
// stored, sent and shown.
package topicconfig
