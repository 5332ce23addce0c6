package bridge

// Views of the bridge's state that only the tests read: the shipped code
// keeps no reader for them.

// heldNow is the number of held requests.
func (h *relayHold) heldNow() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}

// counts reports the peer's admitted and unregistered requests.
func (l *peerLimits) counts(peer string) (sessions, unregistered int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.peers[peer]; c != nil {
		return c.sessions, c.unregistered
	}
	return 0, 0
}

// probeCounts reports the peer's probes before their verdict and in their
// linger.
func (l *peerLimits) probeCounts(peer string) (probes, lingering int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.peers[peer]; c != nil {
		return c.probes, c.lingering
	}
	return 0, 0
}
