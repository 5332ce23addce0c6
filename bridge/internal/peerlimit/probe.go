package peerlimit

import "github.com/wirekube/relay-ws/internal/contract"

// A probe (the bridge's probemode.go) is accounted apart from the peer's
// sessions, so that it never takes the share the agent's own reconnect
// needs: a probe that sends nothing would otherwise hold the peer's only
// unregistered share for --register-timeout and the agent would get 429.
// A peer has at most --max-unregistered-per-peer probes before their
// verdict (the next is 429 peer_unregistered_limit), and at most
// maxProbeLingers probes in their close linger: beyond that a probe closes
// without waiting for the client's close, so one identity probing in a
// loop holds a bounded number of the global slots (each lingering probe
// holds one for up to the close grace).
const maxProbeLingers = 1

// AcquireProbe admits one more probe of peer before its verdict, or says
// why not.
func (l *Limits) AcquireProbe(peer string) (*Ticket, contract.Reason) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.peers[peer]
	if c == nil {
		c = &peerCount{}
	}
	if c.probes >= l.maxUnregistered {
		return nil, contract.ReasonPeerUnregisteredLimit
	}
	c.probes++
	l.peers[peer] = c
	return &Ticket{l: l, peer: peer, probe: true}, ""
}

// StartLinger counts one more probe of peer in its close linger, unless
// the peer has maxProbeLingers already. On true the caller must call
// EndLinger.
func (l *Limits) StartLinger(peer string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.peers[peer]
	if c == nil {
		c = &peerCount{}
	}
	if c.lingering >= maxProbeLingers {
		return false
	}
	c.lingering++
	l.peers[peer] = c
	return true
}

// EndLinger ends a linger StartLinger granted.
func (l *Limits) EndLinger(peer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.peers[peer]
	if c.lingering--; c.idle() {
		delete(l.peers, peer)
	}
}
