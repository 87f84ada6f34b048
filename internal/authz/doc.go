// Package authz decides who may call what on replicad's gRPC servers (the
// brokers' and the controller's), from the identity in the verified client
// certificate of a mutual-TLS connection.
//
// Identity. A principal is the spiffe:// URI SAN of the client's leaf
// certificate (MappingRules.PeerPrincipal), which names a role:
//
//	spiffe://replicad/controller   the controller
//	spiffe://replicad/broker/N     broker N
//	spiffe://replicad/admin        an operator
//	spiffe://replicad/client/NAME  an application client
//
// Any other URI is a principal without a role: it may do what superusers
// and (for clients) ACLs grant it, nothing else. A certificate without a
// spiffe:// SAN (one from a corporate CA) is mapped by MappingRules, as
// Kafka's ssl.principal.mapping.rules: `CN=(.*)->spiffe://replicad/client/$1`
// makes the subject's common name a client. The SAN wins over the rules, so
// a rule cannot make a broker's certificate pass for someone else.
//
// Rules. Authorize is least privilege per role (see rules.go): the controller
// sends control requests to brokers; broker N fetches as replica N and
// registers, heartbeats, shuts down and alters partitions as broker N only
// (the controller's leader check then covers "only partitions it leads");
// admin manages topics and the cluster; clients produce and consume what the
// ACLs grant. Health and reflection are open to whoever passed the TLS
// handshake. Superusers may do everything.
//
// The decision looks at the request too (a broker id, a replica id, a
// topic), so the interceptors authorize every message of a stream, not only
// its start: a follower could otherwise open a Fetch stream as itself and
// then fetch as another replica.
package authz
