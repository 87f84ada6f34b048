package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// ClientAuth is what a server asks of its clients' certificates
// (--tls-client-auth).
type ClientAuth int

const (
	// ClientAuthNone asks for no client certificate.
	ClientAuthNone ClientAuth = iota
	// ClientAuthRequest asks for one and verifies it against the CA when
	// given; a client without one is still served.
	ClientAuthRequest
	// ClientAuthRequire refuses a client without a certificate signed by
	// the CA (mutual TLS).
	ClientAuthRequire
)

// ClientAuthValues lists the --tls-client-auth values, in order.
const ClientAuthValues = "none|request|require"

func (a ClientAuth) String() string {
	switch a {
	case ClientAuthRequest:
		return "request"
	case ClientAuthRequire:
		return "require"
	}
	return "none"
}

// ParseClientAuth parses a --tls-client-auth value.
func ParseClientAuth(s string) (ClientAuth, error) {
	switch s {
	case "", "none":
		return ClientAuthNone, nil
	case "request":
		return ClientAuthRequest, nil
	case "require":
		return ClientAuthRequire, nil
	}
	return ClientAuthNone, fmt.Errorf("want none, request or require (got %q)", s)
}

func (a ClientAuth) tlsMode() tls.ClientAuthType {
	switch a {
	case ClientAuthRequest:
		return tls.VerifyClientCertIfGiven
	case ClientAuthRequire:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// DefaultReloadInterval is how often, at most, the files are looked at for
// a change.
const DefaultReloadInterval = time.Second

// Options name the files of a process's TLS configuration.
type Options struct {
	// Cert and Key are the PEM certificate (chain) and private key: the
	// server certificate, and the client certificate towards other servers.
	Cert, Key string
	// CA is the PEM bundle of CA certificates that verifies peers: the
	// servers this process dials and, with ClientAuth, its clients. Empty:
	// servers are verified with the system roots.
	CA string
	// ClientAuth is what a server asks of its clients.
	ClientAuth ClientAuth
	// ReloadInterval is how often, at most, the files are looked at for a
	// change (on a handshake); 0 is DefaultReloadInterval, negative every
	// handshake (tests).
	ReloadInterval time.Duration
}

// Enabled reports whether any TLS file is set: without one, the process
// speaks plaintext.
func (o Options) Enabled() bool { return o.Cert != "" || o.Key != "" || o.CA != "" }

// Validate checks the combination of options (not the files).
func (o Options) Validate() error {
	if (o.Cert == "") != (o.Key == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if o.ClientAuth != ClientAuthNone && o.CA == "" {
		return fmt.Errorf("--tls-client-auth %s needs --tls-ca (the CA that signs the clients' certificates)", o.ClientAuth)
	}
	if o.ClientAuth != ClientAuthNone && o.Cert == "" {
		return fmt.Errorf("--tls-client-auth %s needs --tls-cert and --tls-key (a TLS server)", o.ClientAuth)
	}
	return nil
}

// TLS is a process's TLS configuration: the certificate and CA loaded from
// Options, re-read when the files change. A nil *TLS is plaintext. Its
// methods are safe for concurrent use.
type TLS struct {
	opts   Options
	logger zerolog.Logger
	now    func() time.Time

	mu      sync.Mutex // serializes reloads
	checked time.Time  // last look at the files
	loaded  stamps     // the files as installed
	failed  stamps     // the files as they last failed to load (logged once)

	cert atomic.Pointer[tls.Certificate] // nil without Cert
	pool atomic.Pointer[x509.CertPool]   // nil without CA (system roots)
}

// stamp is what tells a file changed.
type stamp struct {
	mtime time.Time
	size  int64
}

type stamps struct{ cert, key, ca stamp }

// New loads the files of opts, failing if they cannot be read or do not
// make a key pair; nil (plaintext) when opts names no file. Later changes
// are loaded on the fly and logged to logger.
func New(opts Options, logger zerolog.Logger) (*TLS, error) {
	if !opts.Enabled() {
		return nil, nil
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.ReloadInterval == 0 {
		opts.ReloadInterval = DefaultReloadInterval
	}
	t := &TLS{opts: opts, logger: logger.With().Str("component", "tls").Logger(), now: time.Now}
	st, err := t.stat()
	if err != nil {
		return nil, err
	}
	if err := t.load(st); err != nil {
		return nil, err
	}
	t.loaded, t.checked = st, t.now()
	if c := t.cert.Load(); c != nil {
		t.warnValidity(c.Leaf, "loaded")
	}
	return t, nil
}

// Options are the options t was made with (nil: the zero Options).
func (t *TLS) Options() Options {
	if t == nil {
		return Options{}
	}
	return t.opts
}

func (t *TLS) stat() (stamps, error) {
	var st stamps
	for _, f := range []struct {
		path string
		into *stamp
		flag string
	}{{t.opts.Cert, &st.cert, "--tls-cert"}, {t.opts.Key, &st.key, "--tls-key"}, {t.opts.CA, &st.ca, "--tls-ca"}} {
		if f.path == "" {
			continue
		}
		fi, err := os.Stat(f.path)
		if err != nil {
			return st, fmt.Errorf("%s: %w", f.flag, err)
		}
		*f.into = stamp{fi.ModTime(), fi.Size()}
	}
	return st, nil
}

// load reads the files whose stamps differ from t.loaded (all at the
// start) and installs what they hold; on an error nothing is installed.
func (t *TLS) load(st stamps) error {
	var cert *tls.Certificate
	if t.opts.Cert != "" && (st.cert != t.loaded.cert || st.key != t.loaded.key || t.cert.Load() == nil) {
		c, err := tls.LoadX509KeyPair(t.opts.Cert, t.opts.Key)
		if err != nil {
			return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", t.opts.Cert, t.opts.Key, err)
		}
		cert = &c
	}
	var pool *x509.CertPool
	if t.opts.CA != "" && (st.ca != t.loaded.ca || t.pool.Load() == nil) {
		pem, err := os.ReadFile(t.opts.CA)
		if err != nil {
			return fmt.Errorf("--tls-ca: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--tls-ca %s: no PEM certificate in it", t.opts.CA)
		}
	}
	if cert != nil {
		t.cert.Store(cert)
	}
	if pool != nil {
		t.pool.Store(pool)
	}
	return nil
}

// maybeReload looks at the files if ReloadInterval passed since the last
// look, and loads those that changed. A failure keeps what was loaded
// before and is logged once per change of the files.
//
// It runs on every handshake and does file I/O under t.mu: a handshake that
// finds another one looking goes on with what is loaded (still valid)
// rather than queue behind a stat on a slow file system.
func (t *TLS) maybeReload() {
	now := t.now()
	if !t.mu.TryLock() {
		return
	}
	defer t.mu.Unlock()
	if t.opts.ReloadInterval > 0 && now.Sub(t.checked) < t.opts.ReloadInterval {
		return
	}
	t.checked = now
	st, err := t.stat()
	if err == nil && (st == t.loaded || st == t.failed) {
		return // unchanged, or the same broken files as last time
	}
	if err == nil {
		err = t.load(st)
	}
	if err != nil {
		// Logged once per new state of the files: a rotation that writes
		// the certificate before the key fails for a moment.
		if st != t.failed {
			t.logger.Error().Err(err).Msg("TLS files changed but cannot be loaded: keeping the previous certificate and CA")
			t.failed = st
		}
		return
	}
	t.loaded, t.failed = st, stamps{}
	ev := t.logger.Info()
	if c := t.cert.Load(); c != nil && c.Leaf != nil {
		ev = ev.Str("subject", c.Leaf.Subject.String()).Strs("uris", uriStrings(c.Leaf)).Time("not_after", c.Leaf.NotAfter)
		t.warnValidity(c.Leaf, "reloaded")
	}
	ev.Msg("TLS certificate and CA reloaded")
}

// warnValidity logs a certificate of this process that peers will refuse
// for its dates.
func (t *TLS) warnValidity(c *x509.Certificate, what string) {
	if c == nil {
		return
	}
	now := t.now()
	if now.After(c.NotAfter) {
		t.logger.Warn().Time("not_after", c.NotAfter).Str("file", t.opts.Cert).Msgf("the TLS certificate %s has expired: peers will refuse it", what)
	} else if now.Before(c.NotBefore) {
		t.logger.Warn().Time("not_before", c.NotBefore).Str("file", t.opts.Cert).Msgf("the TLS certificate %s is not valid yet: peers will refuse it", what)
	}
}

// certificate is the current certificate (nil without one).
func (t *TLS) certificate() *tls.Certificate {
	t.maybeReload()
	return t.cert.Load()
}

func (t *TLS) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := t.certificate()
	if c == nil {
		return nil, errors.New("this server has no --tls-cert")
	}
	return c, nil
}

func (t *TLS) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c := t.certificate(); c != nil {
		return c, nil
	}
	// No certificate: the handshake goes on without one (the server decides).
	return &tls.Certificate{}, nil
}

// ServerConfig is the tls.Config of a server: TLS 1.3, the current
// certificate (GetCertificate) and, per handshake, the current CA for the
// clients' certificates (GetConfigForClient). nextProtos are the ALPN
// protocols offered; none is "h2" (gRPC).
func (t *TLS) ServerConfig(nextProtos ...string) *tls.Config {
	if len(nextProtos) == 0 {
		nextProtos = []string{"h2"}
	}
	return &tls.Config{
		MinVersion:     tls.VersionTLS13,
		NextProtos:     nextProtos,
		GetCertificate: t.getCertificate,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			t.maybeReload()
			return &tls.Config{
				MinVersion:     tls.VersionTLS13,
				NextProtos:     nextProtos,
				GetCertificate: t.getCertificate,
				ClientAuth:     t.opts.ClientAuth.tlsMode(),
				ClientCAs:      t.pool.Load(),
			}, nil
		},
	}
}

// ClientConfig is the tls.Config of a client as of now: TLS 1.3, the
// current certificate as the client certificate (GetClientCertificate), and
// the current CA (nil: the system roots) verifying the server by the name
// the dialer sets (ServerName: the dialed host). The gRPC credentials take a
// new one per handshake, so a new CA applies to the next connection.
func (t *TLS) ClientConfig() *tls.Config {
	t.maybeReload()
	return &tls.Config{
		MinVersion:           tls.VersionTLS13,
		NextProtos:           []string{"h2"},
		GetClientCertificate: t.getClientCertificate,
		RootCAs:              t.pool.Load(),
	}
}

func uriStrings(c *x509.Certificate) []string {
	var out []string
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}
