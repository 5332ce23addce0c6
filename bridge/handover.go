package bridge

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"time"
)

// The drain's close order depends on whether the sessions it closes have
// somewhere to go (docs/bridge.md "Drain").
//
//   - Another replica is ready ("handover"): the closes are spread over the
//     first half of --drain-timeout, so the agents arrive there one by one.
//   - No other replica is ready ("hold"): a closed agent would redial into
//     nothing and its backoff (1, 2, 4 ... 30 s) would double past the
//     moment a replacement comes up. The sessions stay open, still carrying
//     traffic, until another replica appears (then the handover begins) or
//     until the drain must end (then all close at once, as late as the
//     close handshake allows).
//   - Unknown (--drain-peers empty): the handover order, the behaviour of
//     earlier versions.
//
// --drain-peers names a DNS name that resolves to the ready replicas only:
// the chart's headless Service of the gateway Pods (Kubernetes publishes a
// Pod's address there only while it is ready, so a Terminating Pod, this
// one, drops out). The bridge's own interface addresses are ignored in the
// answer, for the seconds in which DNS still lists this Pod.

// drainMode names the order the drain chose; it is logged.
type drainMode string

const (
	drainUnknown  drainMode = "spread"   // --drain-peers empty
	drainHandover drainMode = "handover" // another replica is ready
	drainHold     drainMode = "hold"     // none is: keep the sessions
)

// peerPollInterval is how often a holding drain asks DNS again; a lookup
// gets at most peerLookupTimeout.
const (
	peerPollInterval  = time.Second
	peerLookupTimeout = time.Second
)

// otherReplicas reports how many addresses --drain-peers resolves to that
// are not this bridge's own. A failed lookup (no ready replica makes a
// headless Service answer NXDOMAIN) counts as none.
func (s *Server) otherReplicas(ctx context.Context) int {
	ctx, cancel := context.WithTimeout(ctx, peerLookupTimeout)
	defer cancel()
	addrs, err := s.resolvePeers(ctx, s.cfg.DrainPeers)
	if err != nil {
		return 0
	}
	own := s.ownAddrs()
	n := 0
	for _, a := range addrs {
		ip, err := netip.ParseAddr(a)
		if err != nil || own[ip.Unmap()] {
			continue
		}
		n++
	}
	return n
}

// interfaceAddrs returns the addresses of this host's (this Pod's)
// interfaces.
func interfaceAddrs() map[netip.Addr]bool {
	own := make(map[netip.Addr]bool)
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return own
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			own[p.Addr().Unmap()] = true
		}
	}
	return own
}

// holdForReplica waits, while no other replica is ready, until one is
// (true) or until release (false); deadline or idle end it early (false).
// The sessions stay open meanwhile.
func (s *Server) holdForReplica(release <-chan time.Time, idle <-chan struct{}) bool {
	tick := time.NewTicker(peerPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if n := s.otherReplicas(context.Background()); n > 0 {
				return true
			}
		case <-release:
			return false
		case <-idle:
			return false
		}
	}
}

// holdMargin is how long before the drain timeout a holding drain closes
// its sessions: the close handshake's grace and a second for the agents'
// close frames to cross the front.
func (s *Server) holdMargin() time.Duration {
	m := s.closeGrace + time.Second
	if m > s.cfg.DrainTimeout/4 {
		m = s.cfg.DrainTimeout / 4
	}
	return m
}

func (s *Server) logDrain(mode drainMode, sessions int) {
	s.log.Info("draining", slog.String("order", string(mode)), slog.Int("sessions", sessions),
		slog.Duration("timeout", s.cfg.DrainTimeout))
}
