// Package spanevents adds per-item events (one per partition a request
// touches) to a span within a budget, then one summary event counting the
// items left out, so that a request about 10,000 partitions stays cheap to
// trace and readable in Jaeger. The core, the controller and the fetcher
// use it alike: the same summary event, the same attribute.
package spanevents
