package authz

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/replicad/replicad/internal/tlsconf"
)

// Role is what a principal is to the cluster.
type Role int

// The roles of the spiffe://replicad/... identities.
const (
	// RoleNone: a principal outside the replicad scheme; only superusers
	// and ACLs grant it anything.
	RoleNone Role = iota
	RoleController
	RoleBroker
	RoleAdmin
	RoleClient
)

func (r Role) String() string {
	switch r {
	case RoleController:
		return "controller"
	case RoleBroker:
		return "broker"
	case RoleAdmin:
		return "admin"
	case RoleClient:
		return "client"
	}
	return "none"
}

// Principal is a parsed identity.
type Principal struct {
	// URI is the identity as written in certificates, ACLs and
	// --super-users: "spiffe://replicad/broker/2".
	URI  string
	Role Role
	// BrokerID is N of a broker.
	BrokerID int32
	// Client is NAME of a client.
	Client string
}

func (p Principal) String() string { return p.URI }

const spiffePrefix = "spiffe://" + tlsconf.SpiffeTrustDomain + "/"

// ParsePrincipal reads the role out of uri. A URI of another trust domain
// or path is a principal with RoleNone, not an error: superusers and ACLs
// may still name it.
func ParsePrincipal(uri string) Principal {
	p := Principal{URI: uri}
	path, ok := strings.CutPrefix(uri, spiffePrefix)
	if !ok {
		return p
	}
	switch {
	case path == "controller":
		p.Role = RoleController
	case path == "admin":
		p.Role = RoleAdmin
	case strings.HasPrefix(path, "broker/"):
		// Strict digits: "broker/+2" or "broker/02" would otherwise alias broker 2.
		s := strings.TrimPrefix(path, "broker/")
		n, err := strconv.ParseInt(s, 10, 32)
		if err == nil && n >= 0 && strconv.FormatInt(n, 10) == s {
			p.Role, p.BrokerID = RoleBroker, int32(n)
		}
	case strings.HasPrefix(path, "client/"):
		if name := strings.TrimPrefix(path, "client/"); name != "" && !strings.Contains(name, "/") {
			p.Role, p.Client = RoleClient, name
		}
	}
	return p
}

// MappingRule derives a principal from a certificate without a spiffe://
// SAN: `FIELD=REGEXP->TEMPLATE`, FIELD one of CN (the subject's common
// name), DNS, EMAIL or URI (each SAN of that kind is tried), REGEXP matched
// against the whole value, TEMPLATE expanded with $1.. as regexp.Expand.
type MappingRule struct {
	text     string
	field    string
	re       *regexp.Regexp
	template string
}

func (r MappingRule) String() string { return r.text }

// ParseMappingRule parses one --tls-principal-rule.
func ParseMappingRule(s string) (MappingRule, error) {
	lhs, tmpl, ok := strings.Cut(s, "->")
	if !ok {
		return MappingRule{}, fmt.Errorf("rule %q: want FIELD=REGEXP->PRINCIPAL", s)
	}
	field, expr, ok := strings.Cut(lhs, "=")
	field = strings.ToUpper(strings.TrimSpace(field))
	if !ok || (field != "CN" && field != "DNS" && field != "EMAIL" && field != "URI") {
		return MappingRule{}, fmt.Errorf("rule %q: the field is CN, DNS, EMAIL or URI", s)
	}
	re, err := regexp.Compile("^(?:" + expr + ")$")
	if err != nil {
		return MappingRule{}, fmt.Errorf("rule %q: %w", s, err)
	}
	tmpl = strings.TrimSpace(tmpl)
	if tmpl == "" {
		return MappingRule{}, fmt.Errorf("rule %q: empty principal", s)
	}
	return MappingRule{text: s, field: field, re: re, template: tmpl}, nil
}

// Apply is the principal the rule gives c, if it matches.
func (r MappingRule) Apply(c *x509.Certificate) (string, bool) {
	var values []string
	switch r.field {
	case "CN":
		values = []string{c.Subject.CommonName}
	case "DNS":
		values = c.DNSNames
	case "EMAIL":
		values = c.EmailAddresses
	case "URI":
		for _, u := range c.URIs {
			values = append(values, u.String())
		}
	}
	for _, v := range values {
		if m := r.re.FindStringSubmatchIndex(v); m != nil {
			return string(r.re.ExpandString(nil, r.template, v, m)), true
		}
	}
	return "", false
}

// MappingRules are tried in order; the first match wins.
type MappingRules []MappingRule

// Principal is c's identity: its spiffe:// SAN, else the first rule's match.
func (rs MappingRules) Principal(c *x509.Certificate) (string, bool) {
	if id, ok := tlsconf.Principal(c); ok {
		return id, true
	}
	for _, r := range rs {
		if id, ok := r.Apply(c); ok {
			return id, true
		}
	}
	return "", false
}

// ErrUnauthenticated: the call carries no verified client certificate.
var ErrUnauthenticated = errors.New("no verified client certificate")

// PeerPrincipal is the principal of a call's peer: ErrUnauthenticated
// without a verified certificate; a certificate no rule names gives an
// error naming its subject.
func (rs MappingRules) PeerPrincipal(ctx context.Context) (Principal, error) {
	c, err := tlsconf.PeerCertificate(ctx)
	if err != nil {
		return Principal{}, ErrUnauthenticated
	}
	id, ok := rs.Principal(c)
	if !ok {
		return Principal{}, fmt.Errorf("the client certificate (%s) names no spiffe:// identity and no --tls-principal-rule maps it", c.Subject)
	}
	return ParsePrincipal(id), nil
}
