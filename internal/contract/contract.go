// Package contract holds the names this project shares with its users and
// with the proxies in front of it: header names, the WebSocket subprotocol,
// and the stable deny reason codes (docs/spec.md#deny-reasons,
// #close-reasons, #results). Changing a value here
// changes the external contract: update docs/spec.md, the README and every caller with it.
package contract

import (
	"net/http"
	"strings"
)

const (
	// Subprotocol is the WebSocket subprotocol the WireKube agent offers.
	Subprotocol = "wirekube.relay.v1"
	// DefaultAudience is the token audience the gateway requires.
	DefaultAudience = "wirekube-relay"
	// SubprotocolProbe is the probe's subprotocol: the bridge
	// answers it after its relay check with a close frame and never sends a
	// Register to the relay, so a probe leaves the node's live session alone.
	SubprotocolProbe = "wirekube.relay.probe.v1"
	// DefaultRelayPath is the path of the authenticated WebSocket endpoint.
	DefaultRelayPath = "/relay"
	// AgentTokenPath is where the agent's projected token is mounted.
	AgentTokenPath = "/var/run/secrets/wirekube-relay/token"
)

// Identity headers: set by the proxy from the ext_authz answer, read by the
// bridge. The proxy must strip client-supplied copies before ext_authz runs.
const (
	HeaderPrefix       = "X-WireKube-"
	HeaderPeer         = "X-WireKube-Peer"
	HeaderPublicKey    = "X-WireKube-Public-Key"
	HeaderIdentity     = "X-WireKube-Identity"
	HeaderTokenExpires = "X-WireKube-Token-Expires"
	// HeaderBinding is what admitted the session (internal/revocation
	// Binding: identity, ServiceAccount, Pod and Node names and UIDs, peer,
	// key hash; no token, no key). The bridge hands it back to extauthz on
	// the revocation stream, which re-judges it (docs/revocation.md).
	HeaderBinding = "X-WireKube-Binding"
	// HeaderSignature is extauthz's Ed25519 signature over the identity
	// headers above, with an issue time and a single-use nonce
	// (internal/identitysig): the bridge refuses an upgrade
	// whose identity headers it does not carry, so a header set sent
	// straight to the bridge's address is worthless.
	HeaderSignature = "X-WireKube-Signature"
	// HeaderClientAddress is the client's address as extauthz established
	// it from the front's X-Forwarded-For and --trusted-hops
	// (internal/clientaddr: an IP address in canonical form, or
	// "invalid"), covered by the signature: the bridge shows the address
	// extauthz saw, never one a client wrote. It decides
	// nothing.
	HeaderClientAddress = "X-WireKube-Client-Address"
	// HeaderDenyReason carries the Reason of a denied request.
	HeaderDenyReason = "X-WireKube-Deny-Reason"
)

// HeaderRequestID is the front's request id (nginx $request_id set by the
// shipped snippet, Envoy's x-request-id): extauthz and the bridge log it
// beside the front's access log line, so one grep finds both. It is checked
// (internal/logging.RequestID) before it is logged.
const HeaderRequestID = "X-Request-Id"

// IdentityHeaders lists the headers an allow answer for the relay path sets.
var IdentityHeaders = []string{HeaderPeer, HeaderPublicKey, HeaderIdentity, HeaderTokenExpires, HeaderBinding,
	HeaderSignature, HeaderClientAddress}

// IsWireKubeHeader reports whether name is in the X-WireKube-* family
// (case-insensitive), the family a proxy strips from client requests.
func IsWireKubeHeader(name string) bool {
	return len(name) >= len(HeaderPrefix) && strings.EqualFold(name[:len(HeaderPrefix)], HeaderPrefix)
}

// Reason is a stable deny or close reason code. The same string is used in
// the X-WireKube-Deny-Reason header, in log lines and as a metric label.
type Reason string

// Deny reasons answered before a WebSocket upgrade.
const (
	// 400: the request is not what the relay endpoint accepts.
	ReasonNotWebSocket          Reason = "not_websocket"
	ReasonRequestBody           Reason = "request_body"
	ReasonTokenInURL            Reason = "token_in_url"
	ReasonAuthorizationRepeated Reason = "authorization_repeated"
	ReasonSubprotocol           Reason = "subprotocol_unsupported"

	// 401: no usable credential.
	ReasonTokenMissing     Reason = "token_missing"
	ReasonTokenMalformed   Reason = "token_malformed"
	ReasonTokenInvalid     Reason = "token_invalid"
	ReasonAudienceMismatch Reason = "audience_mismatch"

	// 403: a valid token, but not for this.
	ReasonPathNotAllowed            Reason = "path_not_allowed"
	ReasonOriginNotAllowed          Reason = "origin_not_allowed"
	ReasonTokenNotBound             Reason = "token_not_bound"
	ReasonIdentityNotAllowed        Reason = "identity_not_allowed"
	ReasonPodNotFound               Reason = "pod_not_found"
	ReasonPodUIDMismatch            Reason = "pod_uid_mismatch"
	ReasonPodServiceAccountMismatch Reason = "pod_service_account_mismatch"
	ReasonPodNotScheduled           Reason = "pod_not_scheduled"
	ReasonNodeMismatch              Reason = "node_mismatch"
	ReasonServiceAccountNotFound    Reason = "service_account_not_found"
	ReasonPeerNotFound              Reason = "peer_not_found"
	ReasonPeerKeyInvalid            Reason = "peer_key_invalid"
	ReasonIdentityHeaderInvalid     Reason = "identity_header_invalid"
	// ReasonTokenSecretBound: a token bound to a Secret. The
	// gateway cannot follow Secrets (extauthz may not read them), so it
	// could not end a session when the Secret is deleted: refused on the
	// relay path (docs/revocation.md#identities).
	ReasonTokenSecretBound Reason = "token_secret_bound"
	// ReasonPeerKeyDuplicate: the peer's spec.publicKey is also the key of
	// another WireKubePeer. Every agent may write every
	// WireKubePeer, so a copied key is vouched for by neither peer: both
	// are refused, and their live sessions closed, until one key changes.
	ReasonPeerKeyDuplicate Reason = "peer_key_duplicate"
	// ReasonPeerKeyMoved: the peer's spec.publicKey was first held by
	// another WireKubePeer that still exists: a key moved from one
	// peer to another (node M writes a fresh key into V's WireKubePeer, then
	// V's old key into its own) is refused on the new holder, and its live
	// sessions closed, while the first holder exists. Also a 1008 close
	// reason.
	ReasonPeerKeyMoved Reason = "peer_key_moved"
	// ReasonKeyHeldByOtherBinding: the key is registered by a live session
	// admitted under another binding (another ServiceAccount, Pod or Node
	// of the same peer: an agent token and a per-peer token, say; issue
	// 20). A session replaces only a session of its own binding (the
	// agent's reconnect); the other one must end first. Answered by the
	// bridge and extauthz before the upgrade, and by the bridge as a 1008
	// close when two upgrades raced to the Register. 403, not 409: nginx's
	// auth_request passes only 401 and 403 through.
	ReasonKeyHeldByOtherBinding Reason = "key_held_by_other_binding"
	// ReasonPodTerminated: the token's Pod is Succeeded or Failed (issue
	// 28). A Pod in a terminal phase never runs again, so its token binds
	// nothing, though kube-apiserver accepts it until the Pod is deleted or
	// the token expires. Also the 1008 close of its live sessions.
	ReasonPodTerminated Reason = "pod_terminated"

	// 503: fail closed, retryable.
	ReasonReviewUnavailable Reason = "review_unavailable"
	ReasonReviewThrottled   Reason = "review_throttled"
	ReasonRelayUnavailable  Reason = "relay_unavailable"
	ReasonAtCapacity        Reason = "at_capacity"
	ReasonDraining          Reason = "draining"
)

// Deny reasons of local token verification: decided by extauthz
// from the cluster's published signing keys, before and without any
// TokenReview.
const (
	// 401: the token's signature does not verify against any of the
	// cluster's ServiceAccount signing keys (unknown key id, bad signature,
	// not a JWS of an allowed algorithm). The answer says nothing more.
	ReasonTokenSignatureInvalid Reason = "token_signature_invalid"
)

// Recovery and per-identity limits. The bridge answers
// these before the upgrade; bridge_unavailable comes from the front (nginx
// error_page, Envoy local reply) when no bridge takes the connection.
const (
	// 429, with Retry-After: one WireKubePeer has --max-sessions-per-peer
	// sessions, or --max-unregistered-per-peer not yet registered.
	ReasonPeerSessionLimit      Reason = "peer_session_limit"
	ReasonPeerUnregisteredLimit Reason = "peer_unregistered_limit"
	// 503: --relay-wait-max upgrades are already held waiting for the relay.
	ReasonRelayWaitFull Reason = "relay_wait_full"
	// 503: the front could not reach any bridge.
	ReasonBridgeUnavailable Reason = "bridge_unavailable"
	// 403 before the upgrade (register_key_mismatch, CloseRegisterKeyMismatch
	// below, is also a deny reason): the identity registered another key
	// within its backoff window.
)

// Bounds of the bridge's session listing (/debug/sessions), 429
// with Retry-After: 1. Each walk of the session table costs the bridge
// time in proportion to its sessions, whatever the page size.
const (
	// ReasonSessionsListBusy: another listing is being served (one at a
	// time, its write to a slow reader included).
	ReasonSessionsListBusy Reason = "sessions_list_busy"
	// ReasonSessionsListRate: more than contract.SessionsListRate listings
	// a second beyond a burst of SessionsListBurst.
	ReasonSessionsListRate Reason = "sessions_list_rate"
)

// ReasonSourceRateLimited (429): one client address made more failed checks
// (400 or 401) than its bucket holds (extauthz --source-failure-burst); only
// a request that would have failed anyway gets it, so strangers behind an
// address agents share cannot lock an agent out. Envoy answers it too where
// its per-address upgrade limit is turned on (off in the shipped files,
// docs/deploy.md#per-source-limits). Both add Retry-After.
const ReasonSourceRateLimited Reason = "source_rate_limited"

// Close reasons sent in the WebSocket close frame after the upgrade.
const (
	CloseRegisterTimeout     Reason = "register_timeout"      // 1008
	CloseRegisterMissing     Reason = "register_missing"      // 1008: first frame not Register
	CloseRegisterMalformed   Reason = "register_malformed"    // 1008: Register body not 32 bytes
	CloseRegisterKeyMismatch Reason = "register_key_mismatch" // 1008
	CloseRegisterRepeated    Reason = "register_repeated"     // 1008
	CloseFrameForbidden      Reason = "frame_forbidden"       // 1008
	CloseFrameMalformed      Reason = "frame_malformed"       // 1008: length 0
	CloseFrameTooLarge       Reason = "frame_too_large"       // 1009
	CloseTextMessage         Reason = "text_message"          // 1003
	CloseRelayLost           Reason = "relay_lost"            // 1011
	CloseDraining            Reason = "draining"              // 1001
	ClosePingTimeout         Reason = "ping_timeout"          // local close, no frame reaches the peer
	// CloseProbeOK ends a wirekube.relay.probe.v1 session whose Register key
	// matched (1000); nothing reached the relay.
	CloseProbeOK Reason = "probe_ok" // 1000
	// CloseReplicaFull (1013, Try Again Later) bounces a new session from a
	// replica past its full mark (internal/room): upgraded, then closed at
	// once, before any Register or relay dial. The agent counts the upgrade
	// as connected, so it dials again after its 1 s reset wait, and the
	// Service picks a replica afresh. Decided by extauthz beside the bridge
	// before any TokenReview (BindingBounce) or by the bridge itself.
	CloseReplicaFull Reason = "replica_full" // 1013
)

// BindingBounce is the X-WireKube-Binding of extauthz's bounce answer: an
// allow that admits nothing. It carries no other identity header but the
// signature (over this binding and the client address), and the bridge
// answers it with an upgrade and a close 1013 replica_full. A bridge that
// predates it refuses the answer (its peer header is missing): fail closed.
const BindingBounce = "bounce"

// Close reasons of a live session whose authorization ended
// (docs/revocation.md). All close with 1008. A revocation by extauthz also
// reuses the deny reason of the rule that no longer holds: pod_not_found,
// pod_uid_mismatch, pod_service_account_mismatch, pod_terminated, pod_not_scheduled,
// node_mismatch, service_account_not_found, identity_not_allowed,
// token_not_bound, peer_not_found, peer_key_invalid, peer_key_duplicate,
// peer_key_moved.
const (
	CloseTokenExpired    Reason = "token_expired"         // the token's exp (+ --token-expiry-grace) passed
	ClosePeerKeyChanged  Reason = "peer_key_changed"      // the WireKubePeer's spec.publicKey is another key now
	CloseRevoked         Reason = "authorization_revoked" // extauthz revoked it for a reason this bridge does not know
	CloseRevocationStale Reason = "revocation_stale"      // the revocation stream was down for --revocation-stale-timeout
	CloseSessionReplaced Reason = "session_replaced"      // a newer session of this bridge registered the same key
	// CloseRevocationLimit: extauthz watches at most --revocation-max-bindings
	// sessions per bridge; it revokes the ones beyond (it cannot vouch for
	// what it does not watch).
	CloseRevocationLimit Reason = "revocation_limit"
)

// ReasonRevocationUnavailable (503, retryable): the bridge's revocation
// stream has been out of sync longer than --revocation-unready-after (or
// never synced), so it admits no session it could not vouch for; its
// /readyz fails meanwhile (docs/revocation.md).
const ReasonRevocationUnavailable Reason = "revocation_unavailable"

// Deny reasons of the identity signature, answered by the bridge
// before the relay is dialled: the identity headers did not come from an
// extauthz answer the bridge can verify, once, within its window. 403: the
// front (or whoever reached the bridge's address) vouched for an identity
// it cannot prove; nginx passes an upstream's status through unchanged.
const (
	// No X-WireKube-Signature: a front that does not pass it on, or a
	// header set sent straight to the bridge.
	ReasonIdentitySignatureMissing Reason = "identity_signature_missing"
	// Repeated, malformed, an unknown key id, or a signature that does not
	// verify over these identity headers (forged or altered).
	ReasonIdentitySignatureInvalid Reason = "identity_signature_invalid"
	// Signed longer ago than --identity-signature-max-age, or too far in
	// the future (clock skew).
	ReasonIdentitySignatureStale Reason = "identity_signature_stale"
	// A nonce the bridge already accepted within the window: a replay.
	ReasonIdentitySignatureReplayed Reason = "identity_signature_replayed"
	// 503, retryable: --identity-replay-cache-size nonces are remembered
	// and none has expired yet; the bridge cannot tell a replay apart.
	ReasonIdentityReplayCacheFull Reason = "identity_replay_cache_full"
	// 429: the WireKubePeer already holds --identity-replay-peer-share of
	// the nonces remembered within the max age (that many upgrades answered
	// 101 in that window); other peers are unaffected.
	ReasonIdentityReplayPeerShare Reason = "identity_replay_peer_share"
)

// HTTPStatus is the status a deny with this reason answers. Unknown reasons
// map to 403: fail closed.
func (r Reason) HTTPStatus() int {
	switch r {
	case ReasonNotWebSocket, ReasonRequestBody, ReasonTokenInURL, ReasonAuthorizationRepeated, ReasonSubprotocol:
		return http.StatusBadRequest
	case ReasonTokenMissing, ReasonTokenMalformed, ReasonTokenInvalid, ReasonAudienceMismatch:
		return http.StatusUnauthorized
	case ReasonReviewUnavailable, ReasonReviewThrottled, ReasonRelayUnavailable, ReasonAtCapacity, ReasonDraining,
		ReasonRelayWaitFull, ReasonBridgeUnavailable, ReasonRevocationUnavailable, ReasonIdentityReplayCacheFull:
		return http.StatusServiceUnavailable
	case ReasonTokenSignatureInvalid:
		return http.StatusUnauthorized
	case ReasonPeerSessionLimit, ReasonPeerUnregisteredLimit, ReasonSessionsListBusy, ReasonSessionsListRate,
		ReasonSourceRateLimited, ReasonIdentityReplayPeerShare:
		return http.StatusTooManyRequests
	default:
		return http.StatusForbidden
	}
}

// Retryable reports whether a client may retry the same request unchanged.
func (r Reason) Retryable() bool { return r.HTTPStatus() == http.StatusServiceUnavailable }
