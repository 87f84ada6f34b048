package log

// Abandon closes the log without making anything durable (no fsync of its
// segments, index or leader-epoch file): for a log that is about to be
// deleted, whose data nobody will read. A topic deletion of 10,000
// partitions otherwise pays 10,000 fsyncs for nothing. Later calls, and
// Close after it, do nothing.
func (l *Log) Abandon() error { return l.shutdown(false) }
