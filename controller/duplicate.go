package controller

import (
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/replicad/replicad/controller/store"
)

// errDuplicateRegistration refuses a registration of a broker id whose
// session is alive with another incarnation (Kafka's
// DUPLICATE_BROKER_REGISTRATION).
var errDuplicateRegistration = errors.New("broker id registered by another live incarnation")

// duplicateRegistrationLocked reports whether a registration of reg for
// old's broker id, from another incarnation, must be refused because old's
// may still be alive: two processes running as one broker fence each other
// at every registration and leave no partition led for long (issue 19,
// path 13). It returns how long old has been silent.
//
// Kafka refuses a new incarnation until the old session expires. That would
// keep a broker killed -9 and restarted at once out for a whole session
// timeout, which the restart tests and the chaos suite's availability bound
// do not allow for; so two things shorten it:
//
//   - A registration whose previous broker epoch is old's epoch comes from
//     the process that now holds old's log dirs (their broker state names
//     old's epoch, and every log dir is locked by the process using it:
//     internal/dirlock). old's process has then exited: it is accepted at
//     once, as before (the common kill -9 and restart).
//   - Otherwise (another dir, or a life that lost its dirs' state) it is
//     refused only while old heartbeated within half a session timeout. A
//     live broker heartbeats every third of one, so a live duplicate is
//     always refused; a dead one's id is free again half a session timeout
//     after its last heartbeat, before its session even expires. The
//     refused broker retries (brokersession) until then.
//
// A fenced old incarnation never blocks: its session is over. old's
// incarnation may be unknown (a controller that took over since it
// registered): the rule is the same.
func (c *Controller) duplicateRegistrationLocked(old *brokerState, b store.Broker, reg registration) (time.Duration, bool) {
	silent := c.cfg.Clock.Now().Sub(old.seen())
	switch {
	case old.info.Fenced:
		return silent, false
	case reg.incarnation == "":
		// A caller that does not say which process it is (not a
		// brokersession: tools, tests) keeps the old rule: a new
		// registration replaces the live one.
		return silent, false
	case reg.incarnation != "" && reg.incarnation == old.incarnation && old.info.Host == b.Host && old.info.Port == b.Port:
		return silent, false // a retry of the live registration
	case reg.previousEpoch > 0 && reg.previousEpoch == old.info.Epoch:
		return silent, false
	}
	return silent, silent < c.cfg.SessionTimeout/2
}

// endpoint is host:port as a broker registers it.
func endpoint(host string, port int32) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}
