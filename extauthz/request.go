package extauthz

import (
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/clientaddr"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// Request is the front-end independent view of the request to authorize,
// built from an Envoy CheckRequest or from an HTTP auth subrequest.
type Request struct {
	// Frontend names the front end ("grpc", "http") for metrics and logs.
	Frontend string
	// Method is the original request method.
	Method string
	// Target is the original request target: path plus optional "?query".
	// TargetInvalid is set when the front end could not tell it reliably
	// (missing, conflicting or unparsable original-URI headers).
	Target        string
	TargetInvalid bool
	// Authorization holds every Authorization value, one per header line.
	Authorization []string
	// Origin holds every Origin value.
	Origin []string
	// Upgrade and Connection hold the hop-by-hop upgrade headers.
	// UpgradeKnown and ConnectionKnown tell that the proxy passes that header
	// whenever the client sent it (Envoy's gRPC check passes both; the nginx
	// snippet passes both, an empty value dropping the header): then a
	// missing header denies. Otherwise the header is checked only when
	// present.
	Upgrade, Connection           []string
	UpgradeKnown, ConnectionKnown bool
	// HasBody is set when the original request carries a body.
	HasBody bool
	// RequestID is the front's request id, already checked
	// (logging.RequestID): logged with the decision.
	RequestID string
	// Subprotocols holds every Sec-WebSocket-Protocol value: an upgrade
	// that offers only the probe subprotocol registers nothing (the bridge
	// serves it as a probe), so it takes no key from a live session.
	Subprotocols []string
	// ForwardedFor holds every X-Forwarded-For line as the front passed it
	// and PeerAddress the address of the connection the check came on
	// (Envoy's source address, the HTTP front's own address): the client
	// address is read from them (Authorizer.clientAddress), never believed
	// beyond --trusted-hops. Both are untrusted strings: only their parsed
	// form is logged.
	ForwardedFor []string
	PeerAddress  string
	// Front is the connection the check came on, as the listener saw it
	// (never what the check says). Only a front in --trusted-proxies is
	// believed about the client (Authorizer.clientAddress); the zero value
	// (unknown) is not.
	Front clientaddr.Front
}

// Header is one header the allow answer sets on the upstream request.
type Header struct{ Name, Value string }

// Decision is the outcome of one check. Safe to log: it holds no token.
type Decision struct {
	// Reason is empty on allow, the deny code otherwise.
	Reason contract.Reason
	// Headers are set (overwriting) on the upstream request on allow.
	Headers []Header
	// Identity is the ServiceAccount username once TokenReview accepted it.
	Identity string
	// Peer is the bound WireKubePeer name; KeyFingerprint its key's short
	// fingerprint.
	Peer           string
	KeyFingerprint string
	// CacheHit reports whether the TokenReview answer came from the cache.
	CacheHit bool
	// Offline reports a decision made without TokenReview
	// (--on-review-unavailable=verify-offline).
	Offline bool
	// ReviewOwed reports an allow made before its TokenReview
	// (--on-review-throttled=review-after): the review follows.
	ReviewOwed bool
	// Detail names the local verification check that failed (or, for
	// source_rate_limited, the reason the limit replaced), for the log
	// line only: the answer carries nothing beyond the reason code.
	Detail string
	// Bounced: the bounce answer (checks.go:bounce) of a bridge past its full
	// mark, an allow that admits nothing; result bounce, reason bounced.
	Bounced bool
	// RetryAfter is the Retry-After of a source_rate_limited answer, in
	// whole seconds; 0 otherwise.
	RetryAfter int
	// ClaimedNode is the node a token refused by TokenReview names in its
	// verified claims (signature checked locally), for the log line only:
	// the refusal is then traceable by node name.
	ClaimedNode string
	// admissible: the verified claims name an identity some rule of the
	// path could admit (the prefilter, binding.Rules.Admissible). Only such a refusal
	// may choose the object an Event is written on.
	admissible bool
	// firstHolder names the owner of the key of a peer_key_moved refusal
	// (internal/keyhistory): its WireKubePeer, or while that is gone its Node of
	// the same name, gets the Event too.
	firstHolder string
	// binding is what X-WireKube-Binding holds, on a relay allow.
	binding revocation.Binding
	// signRoom: Headers was made for this Decision alone with room for the
	// headers identitySigner.sign appends, which it then appends in place
	// (one allocation per allow instead of two).
	signRoom bool
}

// claimedNode is the node name of verified claims, "" when none.
func claimedNode(c *tokenverify.Claims) string {
	if c == nil || c.Kubernetes.Node == nil {
		return ""
	}
	return c.Kubernetes.Node.Name
}

// Allowed reports whether the request may proceed.
func (d Decision) Allowed() bool { return d.Reason == "" }

// Status is the HTTP status of the answer: 200 on allow.
func (d Decision) Status() int {
	if d.Allowed() {
		return 200
	}
	return d.Reason.HTTPStatus()
}

func deny(r contract.Reason) Decision { return Decision{Reason: r} }

// result is the result label and log field of d and its reason:
// allow/allowed, bounce/bounced, or deny and the deny reason.
func (d *Decision) result() (string, contract.Reason) {
	switch {
	case d.Bounced:
		return "bounce", contract.ResultBounced
	case d.Allowed():
		return "allow", contract.ResultAllowed
	}
	return "deny", d.Reason
}

// pathKind is what checkPath found: the relay path, or one of the
// --authn-only-path prefixes (the identity alone, no WireKubePeer).
type pathKind int

const (
	pathRelay pathKind = iota
	pathAuthnOnly
)
