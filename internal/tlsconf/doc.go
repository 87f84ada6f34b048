// Package tlsconf builds the TLS 1.3 configuration of every replicad
// endpoint (the brokers' and the controller's gRPC servers, every gRPC
// client, the metrics listener) from one certificate, key and CA, the flags
// --tls-cert, --tls-key, --tls-ca and --tls-client-auth.
//
// A process has one certificate: it is its server certificate and, towards
// other servers, its client certificate (as etcd's peer certificates). The
// CA verifies peers both ways: servers verify client certificates with it
// (when --tls-client-auth asks for them), clients verify servers with it,
// by the host they dialed.
//
// The files are re-read when they change on disk (their mtime or size,
// looked at most once per ReloadInterval, on a handshake), so certificates
// rotate without a restart; a reload that fails keeps the last good pair and
// is logged. Handshake failures are explained: an expired, not yet valid,
// wrongly signed or wrong-host certificate, a peer that does not speak TLS,
// a server that refused this process's certificate. Servers log each
// refused handshake with its reason.
//
// A nil *TLS is plaintext (no --tls-* flag): its credentials are insecure,
// and its dial options explain a failure against a server that speaks TLS.
//
// PeerPrincipal extracts the peer's identity, the spiffe:// URI SAN of its
// verified certificate (as `ctlclient certs init` issues them), from a gRPC
// context; authorization builds on it.
package tlsconf
