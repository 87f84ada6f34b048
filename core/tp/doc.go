// Package tp names a partition of a topic (Kafka's TopicPartition) and says
// which topic names are legal.
package tp
