// Package protoconv converts between the wire types of gen/replicad/v1 and the
// domain types of core. It is the only package that knows both: the gRPC
// handlers (service), the follower's fetcher and the simulation call it, so
// none of them has to reach into another's internals for a conversion.
//
// Requests reach these functions already validated (service/validate.go);
// the conversions themselves never fail.
package protoconv
