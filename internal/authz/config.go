package authz

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"
)

// Config is the authorization part of a server's command line (replicad's
// and `ctlclient controller run`'s flags).
type Config struct {
	// MutualTLS: --tls-client-auth require. Authorization is on exactly
	// then (secure by default): without it a client may have no
	// certificate, hence no identity to authorize.
	MutualTLS bool
	// Disabled is --no-authorization: off even with mutual TLS.
	Disabled bool
	// SuperUsers is --super-users, comma-separated principals.
	SuperUsers string
	// Rules are the --tls-principal-rule values, tried in order.
	Rules []string
}

// ParseSuperUsers splits a --super-users list.
func ParseSuperUsers(s string) ([]string, error) {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u == "" {
			continue
		}
		if !strings.Contains(u, "://") {
			return nil, fmt.Errorf("super user %q: want a principal URI (spiffe://replicad/admin)", u)
		}
		out = append(out, u)
	}
	return out, nil
}

// Validate checks the flags' syntax.
func (c Config) Validate() error {
	if _, err := ParseSuperUsers(c.SuperUsers); err != nil {
		return fmt.Errorf("--super-users: %w", err)
	}
	for _, r := range c.Rules {
		if _, err := ParseMappingRule(r); err != nil {
			return fmt.Errorf("--tls-principal-rule: %w", err)
		}
	}
	return nil
}

// NewEnforcer is the Enforcer c asks for, or nil when authorization is
// off; either way it logs the decision at startup, loudly (error) when
// --no-authorization turns it off under mutual TLS. denied may be nil.
func NewEnforcer(c Config, logger zerolog.Logger, denied func(fullMethod string)) (*Enforcer, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.MutualTLS {
		if c.SuperUsers != "" || len(c.Rules) > 0 || c.Disabled {
			logger.Warn().Msg("authorization is off (it needs --tls-client-auth require): --super-users, --tls-principal-rule and --no-authorization are ignored")
		} else {
			logger.Info().Msg("authorization is off: no mutual TLS (--tls-client-auth require turns it on)")
		}
		return nil, nil
	}
	if c.Disabled {
		logger.Error().Msg("AUTHORIZATION IS OFF (--no-authorization): any certificate signed by --tls-ca may call anything, LeaderAndIsr and DeleteTopic included")
		return nil, nil
	}
	users, _ := ParseSuperUsers(c.SuperUsers)
	var rules MappingRules
	for _, r := range c.Rules {
		mr, _ := ParseMappingRule(r)
		rules = append(rules, mr)
	}
	logger.Info().Strs("super_users", users).Int("principal_rules", len(rules)).Msg("authorization is on")
	return &Enforcer{Authorizer: New(users), Rules: rules, Logger: logger.With().Str("component", "authz").Logger(), Denied: denied}, nil
}
