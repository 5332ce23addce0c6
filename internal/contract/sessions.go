package contract

// The bridge's session listing (docs/bridge.md#who-is-connected), served on
// its metrics listener with --debug-sessions; wirekube-relay-probe sessions
// reads it through the API server's Pod proxy.
const (
	// SessionsPath is the listing's path on the metrics listener.
	SessionsPath = "/debug/sessions"
	// SessionsLimitDefault is the page size without ?limit=.
	SessionsLimitDefault = 100
	// SessionsLimitMax is the largest ?limit= accepted; above it 400.
	SessionsLimitMax = 1000
	// SessionsListRate and SessionsListBurst bound the listings a bridge
	// serves: a bucket of SessionsListBurst listings (a full walk of 25,000
	// sessions in pages of SessionsLimitMax fits), refilled at
	// SessionsListRate a second; one listing at a time.
	SessionsListRate  = 10
	SessionsListBurst = 30
)

// SessionList is one page of a bridge's live sessions, oldest first.
type SessionList struct {
	// Live is the number of live sessions on this bridge, whatever the
	// filter and the page.
	Live int `json:"live"`
	// Sessions are the page, in increasing ID order.
	Sessions []SessionInfo `json:"sessions"`
	// Next, when set, is the after= cursor of the next page.
	Next string `json:"next,omitempty"`
}

// SessionInfo is one live session. Never a token, never a whole key.
type SessionInfo struct {
	// ID names the session on its bridge: decimal, increasing, never
	// reused while the bridge runs. The cursor of the listing.
	ID string `json:"id"`
	// Peer is the WireKubePeer (X-WireKube-Peer), Identity the
	// ServiceAccount username (X-WireKube-Identity) the front vouched for.
	Peer     string `json:"peer"`
	Identity string `json:"identity"`
	// Key is the fingerprint of the session's key: the first 8 hex digits
	// of its SHA-256, as in every log line.
	Key string `json:"key"`
	// ClientAddress is the client's address as extauthz established it
	// from the front's X-Forwarded-For and its --trusted-hops, signed with
	// the identity headers (X-WireKube-Client-Address): an IP address,
	// "invalid" (the front's entry was not one) or "unknown" (extauthz
	// sent none). With a forward proxy on the path it is the proxy's
	// address. It decides nothing.
	ClientAddress string `json:"client_address"`
	// Since is when the session was upgraded, RFC 3339 UTC.
	Since string `json:"since"`
	// Expires is the token expiry the front vouched for
	// (X-WireKube-Token-Expires), RFC 3339 UTC; the session is closed
	// --token-expiry-grace after it.
	Expires string `json:"expires"`
	// RequestID is the front's request id of the upgrade (empty if the
	// front sent none).
	RequestID string `json:"request_id,omitempty"`
	// Bytes and frames each way, counted by the bridge: to the relay are
	// the client's, to the client the relay's. Frames include those
	// dropped by the filter; bytes are those written.
	BytesToRelay   int64 `json:"bytes_to_relay"`
	BytesToClient  int64 `json:"bytes_to_client"`
	FramesToRelay  int64 `json:"frames_to_relay"`
	FramesToClient int64 `json:"frames_to_client"`
}
