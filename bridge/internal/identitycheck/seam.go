package identitycheck

// This file is the test seam of the bridge's tests, which run a whole
// Server and so cannot live in this package. Nothing outside tests calls
// it.

// ReplayEntries is the nonces the replay cache holds (0 with the check
// off): wirekube_bridge_identity_replay_cache_entries.
func (c *Checker) ReplayEntries() int {
	if c.v == nil {
		return 0
	}
	return c.v.Replay.Len()
}
