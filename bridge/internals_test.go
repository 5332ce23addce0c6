package bridge

// Views of the bridge's state that only the tests read: the shipped code
// keeps no reader for them.

// heldNow is the number of held requests.
func (h *relayHold) heldNow() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held
}
