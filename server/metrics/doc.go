// Package metrics serves a broker's and a controller's metrics as Prometheus text.
//
// It owns an OpenTelemetry MeterProvider whose only reader is the Prometheus
// exporter, registered on a private Prometheus registry (with the Go runtime
// and process collectors), and the /metrics HTTP handler reading it. The
// provider is not installed globally: otelgrpc and other libraries keep their
// no-op meters, so nothing is measured that nobody scrapes.
//
// The names exported are exactly SPEC's (the exporter adds no unit or _total
// suffix, no otel_scope_* labels and no target_info):
//
//	replicad_partitions                       gauge   hosted partitions, offline ones included
//	replicad_leaders                          gauge   partitions this broker leads
//	replicad_under_replicated_partitions      gauge   led partitions whose ISR is smaller than the replicas
//	replicad_offline_partitions               gauge   hosted partitions in an offline log dir or left without a leader
//	replicad_isr_shrinks_total                counter committed ISR shrinks this broker proposed as leader
//	replicad_isr_expands_total                counter committed ISR expansions
//	replicad_fetcher_max_lag                  gauge   largest follower lag (messages) over every fetched partition
//	replicad_request_duration_seconds{method,code}  histogram  unary gRPC calls served
//	replicad_hw_checkpoint_duration_seconds   histogram  one HW checkpoint of every log dir
//	replicad_authorization_denied_total{method}  counter  calls refused by authorization (internal/authz)
//	replicad_replication_throttle_bytes_per_second  gauge  the replication throttle in force (0: none)
//	replicad_replication_throttled_bytes_total  counter  bytes sent as leader to replicas being added (outside the ISR) under it
//	replicad_replication_throttled_reads_total  counter  such followers' partition reads it left without records
//	replicad_log_open_files                   gauge    log segment and index files open (the --max-open-files cache)
//	replicad_log_open_files_capacity          gauge    that cache's capacity (0: unbounded)
//	replicad_log_file_evictions_total         counter  files the cache closed to make room
//	replicad_log_file_reopens_total           counter  files reopened on use after an eviction
//	replicad_producer_ids                     gauge    idempotent producer IDs held, summed over the partitions here
//
// and per topic, for the roles this broker holds:
//
//	leader:   replicad_topic_leader_partitions{topic}, replicad_topic_under_replicated_partitions{topic},
//	          replicad_topic_leader_log_end_offset{topic} (its rate: messages in/s),
//	          replicad_topic_leader_log_size_bytes{topic}
//	follower: replicad_topic_follower_partitions{topic}
//
// (A follower's log figures would repeat its leader's, and each per-topic
// figure is one more series per topic in every scrape.)
//
// Per replica hosted online, leader or follower (Kafka's kafka.log:type=Log
// metrics), unless replicad --metrics-log-series=false:
//
//	replicad_log_size_bytes{topic,partition}
//	replicad_log_start_offset{topic,partition}
//	replicad_log_end_offset{topic,partition}
//	replicad_log_segments_deleted_total{topic,partition} (retention,
//	          DeleteRecords, following the leader; since the log was opened)
//
// These go to the Prometheus registry as constant metrics (logs.go), not
// through the OpenTelemetry SDK, which costs far more per series.
//
// Traffic, per topic, counted by the gRPC interceptors (traffic.go) as
// Kafka's BrokerTopicMetrics, counters that never drop when a leadership
// moves:
//
//	replicad_topic_messages_in_total{topic}, replicad_topic_bytes_in_total{topic}
//	          (records and key+value bytes of successful produces)
//	replicad_topic_bytes_out_total{topic} (key+value bytes answered to consumers)
//	replicad_topic_replication_bytes_out_total{topic} (batch bytes sent to followers)
//	replicad_produce_requests_total{topic,code}, replicad_consume_requests_total{topic,code},
//	replicad_fetch_partition_results_total{topic,code} (code: NONE,
//	          NOT_LEADER_OR_FOLLOWER, ...)
//	replicad_fetch_streams (follower Fetch streams open)
//
// Per partition followed (from the fetchers, with the log series):
//
//	replicad_follower_lag_records{topic,partition}, replicad_follower_lag_seconds{topic,partition}
//
// Per log dir (ObserveLogDirs, logdirs.go; statfs at each scrape):
//
//	replicad_log_dir_free_bytes{dir}, replicad_log_dir_capacity_bytes{dir}
//
// The gauges are observed at scrape time, in one callback, from
// core.ReplicaManager.MetricsSnapshot and the fetcher manager's MaxLag: the
// broker keeps no metric state for them between scrapes. The per-topic series
// of a role exist only while the broker holds a partition of the topic in
// that role, so they vanish from the next scrape once makeLeaders or
// makeFollowers moves the topic's last partition out of the role (the seed's
// KAFKA-8392 step). A scrape of 10,000 partitions costs a few milliseconds
// (BenchmarkScrape10000).
//
// The counters and the checkpoint histogram are fed by core through
// core.Config.Metrics (Metrics implements core.MetricsRecorder); the request
// histogram by UnaryServerInterceptor. Streams (the follower Fetch stream,
// which lives as long as its fetcher) are not timed.
//
// A controller daemon's metrics (ControllerMetrics, controller.go; the
// daemon's --metrics-listen) share the pipeline (pipeline.go). Read from
// controller.Controller.MetricsSnapshot at each scrape, as constant
// metrics (one snapshot, under the controller's lock, feeds them all):
//
//	replicad_controller_active                1 on the active controller, 0 on a standby
//	replicad_controller_epoch                 the controller epoch of its (last) term
//	replicad_controller_partition_state_changes_total  partition states committed (decisions)
//	replicad_controller_leader_changes_total  of them, those that moved a leadership
//
// and from the active controller only (a standby exports none, so sums
// over every controller stay right):
//
//	replicad_controller_registered_brokers, replicad_controller_fenced_brokers
//	replicad_controller_partitions, replicad_controller_offline_partitions,
//	replicad_controller_leaderless_partitions, replicad_controller_under_min_isr_partitions,
//	replicad_controller_under_replicated_partitions,
//	replicad_controller_preferred_leader_imbalance_partitions
//	replicad_controller_broker_fenced{broker}, replicad_controller_broker_leader_partitions{broker},
//	replicad_controller_broker_preferred_partitions{broker},
//	replicad_controller_broker_preferred_not_led_partitions{broker} (its leader imbalance),
//	replicad_controller_broker_queue_depth{broker} (partitions waiting in its broker queue)
//
// and, through the OpenTelemetry SDK, fed by the Store wrapper around every
// store write (storetiming.go):
//
//	replicad_controller_store_write_duration_seconds{op}  histogram
//	replicad_controller_store_write_errors_total{op}      counter
//
//	m, err := metrics.New()
//	rm, err := core.NewReplicaManager(core.Config{..., Metrics: m})
//	m.Observe(metrics.Sources{Replicas: rm.MetricsSnapshot, FetcherMaxLag: fetchers.MaxLag})
//	mux.Handle("GET /metrics", m.Handler())
//	defer m.Shutdown(ctx)
package metrics
