package revocationclient

// Vouching reports whether the bridge can vouch for a new session: the
// revocation stream is in sync, or was in sync once and has been out of
// sync for less than --revocation-unready-after. Before the first sync it
// cannot. With revocation off it always can (token expiry only).
func (r *Client) Vouching() bool {
	if !r.Enabled() {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inSync || (r.synced && r.now().Sub(r.downSince) < r.unready)
}
