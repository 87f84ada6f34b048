package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Development certificates: a CA and ECDSA P-256 leaves made with
// crypto/x509, for `ctlclient certs init` and tests. Not for production.

// CA is a certificate authority that issues leaves.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed CA named cn, valid from notBefore to notAfter.
func NewCA(cn string, notBefore, notAfter time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"replicad development"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads a CA written by WriteDevCerts (ca.crt, ca.key).
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ECDSA key", keyFile)
	}
	return &CA{Cert: pair.Leaf, Key: key}, nil
}

// CertPEM is the CA certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// KeyPEM is the CA key, PEM-encoded (PKCS #8).
func (ca *CA) KeyPEM() ([]byte, error) { return keyPEM(ca.Key) }

// Leaf describes a certificate to issue.
type Leaf struct {
	// Principal is the spiffe:// URI SAN naming the holder's role.
	Principal string
	// DNS and IPs are the host names it is valid for.
	DNS []string
	IPs []net.IP
	// NotBefore and NotAfter bound its validity.
	NotBefore, NotAfter time.Time
}

// LoopbackLeaf is a leaf for principal valid on loopback (localhost,
// 127.0.0.1, ::1) from an hour ago for validFor.
func LoopbackLeaf(principal string, validFor time.Duration) Leaf {
	now := time.Now()
	return Leaf{Principal: principal, DNS: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validFor)}
}

// Issue signs a leaf usable both as a server and as a client certificate,
// and returns it and its new key, PEM-encoded.
func (ca *CA) Issue(l Leaf) (certPEM, keyPEMBytes []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.Principal, Organization: []string{"replicad development"}},
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     l.DNS,
		IPAddresses:  l.IPs,
	}
	if l.Principal != "" {
		u, err := url.Parse(l.Principal)
		if err != nil {
			return nil, nil, fmt.Errorf("principal %q: %w", l.Principal, err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	k, err := keyPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), k, nil
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err)
	}
	return n
}

// Principals of the development certificates.
const (
	ControllerPrincipal = "spiffe://" + SpiffeTrustDomain + "/controller"
	AdminPrincipal      = "spiffe://" + SpiffeTrustDomain + "/admin"
)

// BrokerPrincipal is broker id's identity.
func BrokerPrincipal(id int) string {
	return "spiffe://" + SpiffeTrustDomain + "/broker/" + strconv.Itoa(id)
}

// ClientPrincipal is the identity of the client called name.
func ClientPrincipal(name string) string { return "spiffe://" + SpiffeTrustDomain + "/client/" + name }

// DevCertsOptions configure WriteDevCerts.
type DevCertsOptions struct {
	Dir string
	// Brokers is how many broker certificates: broker-1 .. broker-N.
	Brokers int
	// ClientName names the client certificate's identity
	// (spiffe://replicad/client/NAME); empty is "default".
	ClientName string
	// Force overwrites existing files; without it, WriteDevCerts refuses
	// to if any of them exists.
	Force bool
	// CAValidity and LeafValidity are how long the CA and the leaves are
	// valid; 0 is 10 years and 1 year.
	CAValidity, LeafValidity time.Duration
}

// ErrExists is WriteDevCerts refusing to overwrite a file without Force.
var ErrExists = errors.New("file exists")

// WriteDevCerts writes a development CA (ca.crt, ca.key) and the leaves it
// signs, each valid on loopback: controller, broker-1..N, admin and client
// (NAME.crt and NAME.key). Keys are mode 0600. It returns the files written.
func WriteDevCerts(o DevCertsOptions) ([]string, error) {
	if o.Dir == "" {
		return nil, errors.New("no directory")
	}
	if o.Brokers < 0 {
		return nil, fmt.Errorf("negative broker count %d", o.Brokers)
	}
	if o.ClientName == "" {
		o.ClientName = "default"
	}
	if o.CAValidity <= 0 {
		o.CAValidity = 10 * 365 * 24 * time.Hour
	}
	if o.LeafValidity <= 0 {
		o.LeafValidity = 365 * 24 * time.Hour
	}
	leaves := []struct{ name, principal string }{{"controller", ControllerPrincipal}}
	for i := 1; i <= o.Brokers; i++ {
		leaves = append(leaves, struct{ name, principal string }{"broker-" + strconv.Itoa(i), BrokerPrincipal(i)})
	}
	leaves = append(leaves, struct{ name, principal string }{"admin", AdminPrincipal},
		struct{ name, principal string }{"client", ClientPrincipal(o.ClientName)})

	names := []string{"ca.crt", "ca.key"}
	for _, l := range leaves {
		names = append(names, l.name+".crt", l.name+".key")
	}
	if !o.Force {
		for _, n := range names {
			p := filepath.Join(o.Dir, n)
			if _, err := os.Stat(p); err == nil {
				return nil, fmt.Errorf("%s: %w (--force overwrites)", p, ErrExists)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, err
	}
	now := time.Now()
	ca, err := NewCA("replicad development CA", now.Add(-time.Hour), now.Add(o.CAValidity))
	if err != nil {
		return nil, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	var written []string
	write := func(name string, data []byte, mode os.FileMode) error {
		p, err := writeReplacing(o.Dir, name, data, mode)
		if err != nil {
			return err
		}
		written = append(written, p)
		return nil
	}
	if err := write("ca.crt", ca.CertPEM(), 0o644); err != nil {
		return written, err
	}
	if err := write("ca.key", caKey, 0o600); err != nil {
		return written, err
	}
	for _, l := range leaves {
		c, k, err := ca.Issue(LoopbackLeaf(l.principal, o.LeafValidity))
		if err != nil {
			return written, err
		}
		if err := write(l.name+".crt", c, 0o644); err != nil {
			return written, err
		}
		if err := write(l.name+".key", k, 0o600); err != nil {
			return written, err
		}
	}
	return written, nil
}

// writeReplacing writes data to dir/name with mode, replacing rather than
// rewriting in place: a process watching the file never reads half of it.
func writeReplacing(dir, name string, data []byte, mode os.FileMode) (string, error) {
	p := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return "", err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return "", err
	}
	return p, nil
}

// IssueOptions configure IssueDevCert.
type IssueOptions struct {
	// Dir holds the CA (ca.crt, ca.key, as WriteDevCerts wrote them).
	Dir string
	// OutDir receives NAME.crt and NAME.key; empty is Dir.
	OutDir string
	// Name names the files.
	Name string
	// Principal is the identity the certificate carries.
	Principal string
	// DNS and IPs are the hosts it is valid for; both empty is loopback.
	DNS []string
	IPs []net.IP
	// Validity is how long it is valid; 0 is a year.
	Validity time.Duration
	// Force overwrites NAME.crt and NAME.key.
	Force bool
}

// ErrNoCAKey is IssueDevCert finding no ca.key next to ca.crt: the CA was
// not made by WriteDevCerts, or its key was moved away.
var ErrNoCAKey = errors.New("no CA key")

// IssueDevCert signs one more leaf with the CA in o.Dir, leaving ca.crt and
// ca.key as they are (read, never written), and writes it as NAME.crt and
// NAME.key (mode 0600). It returns the files written.
func IssueDevCert(o IssueOptions) ([]string, error) {
	if o.Dir == "" {
		return nil, errors.New("no directory")
	}
	if o.Name == "" || o.Name == "ca" || o.Name != filepath.Base(o.Name) || o.Name == "." || o.Name == ".." {
		return nil, fmt.Errorf("name %q: want a plain file name other than ca", o.Name)
	}
	if o.OutDir == "" {
		o.OutDir = o.Dir
	}
	if o.Validity <= 0 {
		o.Validity = 365 * 24 * time.Hour
	}
	caCert, caKey := filepath.Join(o.Dir, "ca.crt"), filepath.Join(o.Dir, "ca.key")
	for _, f := range []struct {
		path string
		err  error
	}{{caCert, errors.New("no CA certificate")}, {caKey, ErrNoCAKey}} {
		if _, err := os.Stat(f.path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", f.path, f.err)
		} else if err != nil {
			return nil, err
		}
	}
	ca, err := LoadCA(caCert, caKey)
	if err != nil {
		return nil, fmt.Errorf("loading the CA in %s: %w", o.Dir, err)
	}
	if !ca.Cert.IsCA {
		return nil, fmt.Errorf("%s is not a CA certificate", caCert)
	}
	if !o.Force {
		for _, n := range []string{o.Name + ".crt", o.Name + ".key"} {
			p := filepath.Join(o.OutDir, n)
			if _, err := os.Stat(p); err == nil {
				return nil, fmt.Errorf("%s: %w (--force overwrites)", p, ErrExists)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		}
	}
	leaf := LoopbackLeaf(o.Principal, o.Validity)
	if len(o.DNS) > 0 || len(o.IPs) > 0 {
		leaf.DNS, leaf.IPs = o.DNS, o.IPs
	}
	// A leaf outliving its CA fails verification from the CA's expiry on;
	// cap it there rather than hand out a certificate that lies.
	if leaf.NotAfter.After(ca.Cert.NotAfter) {
		leaf.NotAfter = ca.Cert.NotAfter
	}
	c, k, err := ca.Issue(leaf)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.OutDir, 0o700); err != nil {
		return nil, err
	}
	var written []string
	// The key first: a certificate without its key is useless, a key
	// without its certificate is harmless.
	for _, f := range []struct {
		name string
		data []byte
		mode os.FileMode
	}{{o.Name + ".key", k, 0o600}, {o.Name + ".crt", c, 0o644}} {
		p, err := writeReplacing(o.OutDir, f.name, f.data, f.mode)
		if err != nil {
			return written, err
		}
		written = append(written, p)
	}
	return written, nil
}
