package tlsconf

import (
	"context"
	"crypto/x509"
	"errors"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// SpiffeTrustDomain is the trust domain of the identities `ctlclient certs
// init` issues: spiffe://replicad/controller, spiffe://replicad/broker/N,
// spiffe://replicad/admin, spiffe://replicad/client/NAME.
const SpiffeTrustDomain = "replicad"

// Errors of PeerPrincipal.
var (
	// ErrNoTLS: the call did not come over TLS (a plaintext server).
	ErrNoTLS = errors.New("tlsconf: the peer did not connect over TLS")
	// ErrNoPeerCertificate: the peer presented no (verified) certificate.
	ErrNoPeerCertificate = errors.New("tlsconf: the peer presented no verified certificate")
	// ErrNoPrincipal: its certificate carries no spiffe:// URI SAN.
	ErrNoPrincipal = errors.New("tlsconf: the peer's certificate names no spiffe:// identity")
)

// PeerPrincipal is the identity of the peer of a gRPC call (a server
// handler's or interceptor's ctx): the spiffe:// URI SAN of the leaf
// certificate it presented and the server verified, such as
// "spiffe://replicad/broker/2". Authorization keys on it.
func PeerPrincipal(ctx context.Context) (string, error) {
	c, err := PeerCertificate(ctx)
	if err != nil {
		return "", err
	}
	if id, ok := Principal(c); ok {
		return id, nil
	}
	return "", ErrNoPrincipal
}

// PeerCertificate is the verified leaf certificate of a gRPC call's peer
// (ErrNoTLS, ErrNoPeerCertificate without one): authorization maps it to a
// principal when it has no spiffe:// SAN.
func PeerCertificate(ctx context.Context) (*x509.Certificate, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil, ErrNoTLS
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil, ErrNoTLS
	}
	// VerifiedChains, not PeerCertificates: with --tls-client-auth none a
	// client certificate is not even asked for, and only a verified one
	// names anybody.
	if len(info.State.VerifiedChains) == 0 || len(info.State.VerifiedChains[0]) == 0 {
		return nil, ErrNoPeerCertificate
	}
	return info.State.VerifiedChains[0][0], nil
}

// Principal is the first spiffe:// URI SAN of c.
func Principal(c *x509.Certificate) (string, bool) {
	if c == nil {
		return "", false
	}
	for _, u := range c.URIs {
		if u.Scheme == "spiffe" {
			return u.String(), true
		}
	}
	return "", false
}
