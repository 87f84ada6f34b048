package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// Roles name the two ends of a connection in error messages: "the
// controller at 127.0.0.1:9090 speaks TLS; this broker has no --tls-*".
type Roles struct {
	// Peer is what is dialed: "controller", "broker", "leader"; empty is
	// "server".
	Peer string
	// Self is this process: "this broker", "ctlclient"; empty is "this
	// process".
	Self string
}

func (r Roles) peer() string {
	if r.Peer == "" {
		return "server"
	}
	return r.Peer
}

func (r Roles) self() string {
	if r.Self == "" {
		return "this process"
	}
	return r.Self
}

// ServerCredentials are the gRPC credentials of a server: TLS 1.3 with
// ServerConfig; each refused handshake is logged with its reason. Plaintext
// (nil t): insecure credentials.
func (t *TLS) ServerCredentials() credentials.TransportCredentials {
	if t == nil {
		return insecure.NewCredentials()
	}
	return &serverCreds{t: t, inner: credentials.NewTLS(t.ServerConfig())}
}

// ServerOption is grpc.Creds(t.ServerCredentials()).
// Plaintext (nil t): no option (a server without credentials).
func (t *TLS) ServerOption() grpc.ServerOption {
	if t == nil {
		return grpc.EmptyServerOption{}
	}
	return grpc.Creds(t.ServerCredentials())
}

// ClientCredentials are the gRPC credentials of a client: TLS 1.3 with a
// fresh ClientConfig per handshake (so a reloaded CA or certificate applies
// to the next connection), verifying the server by the dialed host, with
// failures explained. Plaintext (nil t): insecure credentials.
func (t *TLS) ClientCredentials() credentials.TransportCredentials {
	return t.ClientCredentialsFor(Roles{})
}

// ClientCredentialsFor is ClientCredentials naming roles in its errors.
func (t *TLS) ClientCredentialsFor(roles Roles) credentials.TransportCredentials {
	if t == nil {
		return insecure.NewCredentials()
	}
	return &clientCreds{t: t, roles: roles}
}

// DialOptions are the transport credentials of a client dialing a roles.Peer:
// TLS as ClientCredentialsFor, or, plaintext (nil t), insecure credentials
// with interceptors that, when a call fails Unavailable, look whether the
// server speaks TLS and say so ("the controller at X speaks TLS; this
// broker has no --tls-*").
func (t *TLS) DialOptions(roles Roles) []grpc.DialOption {
	if t != nil {
		return []grpc.DialOption{grpc.WithTransportCredentials(t.ClientCredentialsFor(roles))}
	}
	p := &plaintextProbe{roles: roles, cache: map[string]probeResult{}}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(p.unary),
		grpc.WithChainStreamInterceptor(p.stream),
	}
}

// The phrases IsMismatch looks for in an error's text (it crosses gRPC as
// a status message).
const (
	speaksTLSPhrase      = " speaks TLS; "
	doesNotSpeakTLSPhase = " does not speak TLS"
)

// IsMismatch reports whether err (a gRPC error included) says that one side
// speaks TLS and the other plaintext: a configuration mistake that retrying
// does not fix.
func IsMismatch(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, speaksTLSPhrase) || strings.Contains(msg, doesNotSpeakTLSPhase)
}

type serverCreds struct {
	t     *TLS
	inner credentials.TransportCredentials
}

func (s *serverCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsconf: server credentials used by a client")
}

func (s *serverCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	lc := &lingerConn{Conn: raw}
	lc.handshaking.Store(true)
	cork := &corkConn{Conn: lc}
	conn, info, err := s.inner.ServerHandshake(cork)
	lc.handshaking.Store(false)
	if err != nil {
		remote := "?"
		if a := raw.RemoteAddr(); a != nil {
			remote = a.String()
		}
		reason := explainServer(err, s.t.opts.ClientAuth, s.t.now())
		ev := s.t.logger.Warn()
		if errors.Is(err, io.EOF) {
			ev = s.t.logger.Debug() // a client that hung up (or a TLS probe)
		}
		ev.Str("remote", remote).Str("reason", reason).Msg("refused a TLS handshake")
		return nil, nil, fmt.Errorf("TLS handshake with %s: %s: %w", remote, reason, err)
	}
	return &corkedConn{Conn: conn, cork: cork}, info, nil
}

// lingerConn closes a connection whose handshake failed gently: it sends
// its FIN after the alert and reads what the client still sends for a
// moment before closing. Closed at once, with the client's first bytes
// unread, the kernel resets the connection and the client may never read
// the alert (in TLS 1.3 the client has finished its handshake and written
// before the server judges its certificate).
type lingerConn struct {
	net.Conn
	handshaking atomic.Bool
}

// lingerTimeout bounds the wait for the client to read the alert.
const lingerTimeout = time.Second

func (l *lingerConn) Close() error {
	if l.handshaking.Load() {
		// Without CloseWrite (a wrapped connection: a connection-limiting
		// listener's) the client still reads the alert, and hangs up.
		if cw, ok := l.Conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		_ = l.Conn.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.CopyN(io.Discard, l.Conn, 1<<20)
	}
	return l.Conn.Close()
}

func (s *serverCreds) Info() credentials.ProtocolInfo { return s.inner.Info() }
func (s *serverCreds) Clone() credentials.TransportCredentials {
	return &serverCreds{t: s.t, inner: s.inner.Clone()}
}

//lint:ignore SA1019 part of the interface
func (s *serverCreds) OverrideServerName(string) error { return nil }

type clientCreds struct {
	t          *TLS
	roles      Roles
	serverName string
}

func (c *clientCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	cfg := c.t.ClientConfig()
	cfg.ServerName = c.serverName
	cork := &corkConn{Conn: raw}
	conn, info, err := credentials.NewTLS(cfg).ClientHandshake(ctx, authority, cork)
	if err != nil {
		return nil, nil, explainClient(err, c.roles, authority, c.t.opts, c.t.now())
	}
	return &explainedConn{Conn: &corkedConn{Conn: conn, cork: cork}, roles: c.roles, addr: authority}, info, nil
}

func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsconf: client credentials used by a server")
}

func (c *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.3", ServerName: c.serverName}
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	cp := *c
	return &cp
}

// OverrideServerName sets the name the server's certificate is verified
// against instead of the dialed host.
//
//lint:ignore SA1019 part of the interface
func (c *clientCreds) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}

// explainedConn explains a server's refusal of this client's certificate:
// in TLS 1.3 the client's handshake completes before the server judges the
// client certificate, and the refusal arrives as an alert on the first read.
type explainedConn struct {
	net.Conn
	roles Roles
	addr  string
}

func (e *explainedConn) Read(b []byte) (int, error) {
	n, err := e.Conn.Read(b)
	if err != nil {
		err = explainAlert(err, e.roles, e.addr)
	}
	return n, err
}

func (e *explainedConn) Write(b []byte) (int, error) {
	n, err := e.Conn.Write(b)
	if err != nil {
		err = explainAlert(err, e.roles, e.addr)
	}
	return n, err
}

// remoteAlert is the text of the TLS alert the peer sent ("tls: bad
// certificate"), if err is one.
func remoteAlert(err error) (string, bool) {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "remote error" && oe.Err != nil {
		return oe.Err.Error(), true
	}
	return "", false
}

// explainAlert rewords a TLS alert from the server about this client's
// certificate; other errors are returned as they are.
func explainAlert(err error, roles Roles, addr string) error {
	alert, ok := remoteAlert(err)
	if !ok {
		return err
	}
	who := fmt.Sprintf("the %s at %s", roles.peer(), addr)
	var why string
	switch alert {
	case "tls: certificate required":
		why = fmt.Sprintf("%s requires a client certificate (mutual TLS) and %s presented none: set --tls-cert and --tls-key", who, roles.self())
	case "tls: unknown certificate authority":
		why = fmt.Sprintf("%s refused the certificate of %s: it is not signed by a CA that server trusts (its --tls-ca)", who, roles.self())
	case "tls: expired certificate":
		why = fmt.Sprintf("%s refused the certificate of %s: it has expired or is not valid yet", who, roles.self())
	case "tls: bad certificate", "tls: unsupported certificate":
		why = fmt.Sprintf("%s refused the certificate of %s (%s; the server's log tells why)", who, roles.self(), alert)
	case "tls: protocol version not supported":
		why = fmt.Sprintf("%s does not speak TLS 1.3", who)
	default:
		why = fmt.Sprintf("%s ended the TLS session", who)
	}
	return fmt.Errorf("%s: %w", why, err)
}

// explainClient rewords a failed client handshake with the server at addr.
func explainClient(err error, roles Roles, addr string, opts Options, now time.Time) error {
	who := fmt.Sprintf("the %s at %s", roles.peer(), addr)
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		return fmt.Errorf("%s%s (a plaintext server, started without --tls-*?), but %s has --tls-* set: %w", who, doesNotSpeakTLSPhase, roles.self(), err)
	}
	if why, ok := explainCert(err, "the certificate of "+who, now); ok {
		if errors.As(err, new(x509.UnknownAuthorityError)) {
			ca := "the system roots (no --tls-ca)"
			if opts.CA != "" {
				ca = "--tls-ca " + opts.CA
			}
			why += " in " + ca
		}
		return fmt.Errorf("%s: %w", why, err)
	}
	if _, ok := remoteAlert(err); ok {
		return explainAlert(err, roles, addr)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s closed the connection during the TLS handshake (does it speak TLS 1.3?): %w", who, err)
	}
	return fmt.Errorf("TLS handshake with %s: %w", who, err)
}

// explainCert words an x509 verification failure of a certificate called
// whose; ok is false when err is none.
func explainCert(err error, whose string, now time.Time) (string, bool) {
	var inv x509.CertificateInvalidError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	switch {
	case errors.As(err, &inv) && inv.Reason == x509.Expired && inv.Cert != nil:
		c := inv.Cert
		if now.Before(c.NotBefore) {
			return fmt.Sprintf("%s (%s) is not valid yet: valid from %s, it is %s", whose, name(c),
				c.NotBefore.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)), true
		}
		return fmt.Sprintf("%s (%s) has expired: valid until %s, it is %s", whose, name(c),
			c.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)), true
	case errors.As(err, &inv):
		return fmt.Sprintf("%s is invalid: %v", whose, inv), true
	case errors.As(err, &ua):
		issuer := "?"
		if ua.Cert != nil {
			issuer = ua.Cert.Issuer.String()
		}
		return fmt.Sprintf("%s is signed by an unknown CA (issuer %q): not by a CA", whose, issuer), true
	case errors.As(err, &he):
		var names []string
		if he.Certificate != nil {
			names = append(names, he.Certificate.DNSNames...)
			for _, ip := range he.Certificate.IPAddresses {
				names = append(names, ip.String())
			}
		}
		return fmt.Sprintf("%s is not valid for host %s: it names %s (dial a host it names, or reissue it with that host)", whose, he.Host,
			strings.Join(names, ", ")), true
	}
	return "", false
}

// explainServer words why a server refused a client's handshake.
func explainServer(err error, auth ClientAuth, now time.Time) string {
	var rh tls.RecordHeaderError
	switch {
	case errors.As(err, &rh):
		return "the client does not speak TLS (a plaintext client, started without --tls-*?)"
	case strings.Contains(err.Error(), "client didn't provide a certificate"):
		return fmt.Sprintf("the client presented no certificate, and --tls-client-auth %s asks for one", auth)
	case errors.Is(err, io.EOF):
		return "the client closed the connection during the handshake"
	}
	if why, ok := explainCert(err, "the client certificate", now); ok {
		if errors.As(err, new(x509.UnknownAuthorityError)) {
			why += " in this server's --tls-ca"
		}
		return why
	}
	if alert, ok := remoteAlert(err); ok {
		return fmt.Sprintf("the client refused this server's certificate (%s; the client's error tells why)", strings.TrimPrefix(alert, "tls: "))
	}
	return err.Error()
}

// name is how a certificate is named in messages: its spiffe URI, or its subject.
func name(c *x509.Certificate) string {
	if p, ok := Principal(c); ok {
		return p
	}
	return c.Subject.String()
}

// plaintextProbe diagnoses a plaintext client's failures against a server
// that speaks TLS.
type plaintextProbe struct {
	roles Roles
	mu    sync.Mutex
	cache map[string]probeResult // by address
}

type probeResult struct {
	at  time.Time
	tls bool
}

// probeTTL is how long a probe's answer is reused.
const probeTTL = 2 * time.Second

func (p *plaintextProbe) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return p.explain(ctx, cc, invoker(ctx, method, req, reply, cc, opts...))
}

func (p *plaintextProbe) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	return s, p.explain(ctx, cc, err)
}

func (p *plaintextProbe) explain(ctx context.Context, cc *grpc.ClientConn, err error) error {
	if status.Code(err) != codes.Unavailable {
		return err
	}
	addr := targetAddr(cc.Target())
	if !p.speaksTLS(ctx, addr) {
		return err
	}
	return status.Errorf(codes.Unavailable, "the %s at %s%s%s has no --tls-* (set --tls-ca, and --tls-cert and --tls-key if it asks for a client certificate): %s",
		p.roles.peer(), addr, speaksTLSPhrase, p.roles.self(), status.Convert(err).Message())
}

func (p *plaintextProbe) speaksTLS(ctx context.Context, addr string) bool {
	p.mu.Lock()
	r, ok := p.cache[addr]
	p.mu.Unlock()
	if ok && time.Since(r.at) < probeTTL {
		return r.tls
	}
	yes := SpeaksTLS(ctx, addr, time.Second)
	p.mu.Lock()
	p.cache[addr] = probeResult{at: time.Now(), tls: yes}
	p.mu.Unlock()
	return yes
}

// SpeaksTLS reports whether the server at addr answers a TLS handshake
// (whether or not its certificate would be trusted), within timeout.
func SpeaksTLS(ctx context.Context, addr string, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer raw.Close()
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a probe: nothing is sent
	err = c.HandshakeContext(ctx)
	if err == nil {
		_ = c.Close()
		return true
	}
	_, alert := remoteAlert(err)
	return alert
}

// targetAddr is the host:port of a gRPC target ("dns:///h:p", "h:p").
func targetAddr(target string) string {
	if i := strings.Index(target, "://"); i >= 0 {
		rest := target[i+3:]
		if j := strings.Index(rest, "/"); j >= 0 {
			return rest[j+1:]
		}
		return rest
	}
	return target
}
