package peerlimit

// This file is the test seam of the bridge's tests, which run a whole
// Server and so cannot live in this package: a peer's counts. Nothing
// outside tests calls it.

// Counts reports the peer's admitted and unregistered requests.
func (l *Limits) Counts(peer string) (sessions, unregistered int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.peers[peer]; c != nil {
		return c.sessions, c.unregistered
	}
	return 0, 0
}

// ProbeCounts reports the peer's probes before their verdict and in their
// linger.
func (l *Limits) ProbeCounts(peer string) (probes, lingering int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.peers[peer]; c != nil {
		return c.probes, c.lingering
	}
	return 0, 0
}
