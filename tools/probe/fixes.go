package probe

import (
	"net/http"
	"strings"

	"github.com/wirekube/relay-ws/internal/contract"
)

// fixes maps every stable deny and close reason of internal/contract to a
// one-line fix an operator can act on. A test fails when contract gains a
// reason that is missing here.
var fixes = map[contract.Reason]string{
	// 400 / 405: the request itself.
	contract.ReasonNotWebSocket:          "the request reached the gateway as no GET WebSocket upgrade: send a GET upgrade, and check that the proxy in front passes Upgrade/Connection headers (nginx: proxy_http_version 1.1 and explicit Upgrade/Connection)",
	contract.ReasonRequestBody:           "the upgrade request carried a body: send a plain GET upgrade (a proxy or client adds a body)",
	contract.ReasonTokenInURL:            "a token was put in the URL: remove it from the query string and send it only as Authorization: Bearer",
	contract.ReasonAuthorizationRepeated: "the request carried more than one Authorization header: check that no proxy adds its own",
	contract.ReasonSubprotocol:           "the client did not offer subprotocol wirekube.relay.v1: upgrade the agent or fix the proxy that strips Sec-WebSocket-Protocol",

	// 401: no usable credential.
	contract.ReasonTokenMissing:     "no Authorization: Bearer token was sent: check --token-file (the agent reads /var/run/secrets/wirekube-relay/token) and that no proxy strips the header",
	contract.ReasonTokenMalformed:   "the token is not a well-formed JWT (or the header is not 'Bearer <token>'): check the token file holds exactly one ServiceAccount token",
	contract.ReasonTokenInvalid:     "the token was rejected by TokenReview (expired, revoked, or from another cluster): issue a fresh one (wirekube-relay-token issue --peer NAME) or check the projected token mount",
	contract.ReasonAudienceMismatch: "the token's audience is not wirekube-relay: issue it with --audience=wirekube-relay",
	// 401, local verification.
	contract.ReasonTokenSignatureInvalid: "the token's signature does not verify against this cluster's ServiceAccount signing keys: use a token issued by this cluster (a token of another cluster, or one made up, never passes); after a signing-key rotation issue a fresh one",

	// 403: a valid token, but not for this.
	contract.ReasonPathNotAllowed:            "the token is not allowed on this path: connect to /relay",
	contract.ReasonOriginNotAllowed:          "the Origin header is not allowed: agents send no Origin; add the origin to the gateway's allowed origins only for browser use",
	contract.ReasonTokenNotBound:             "the token is not bound to a Pod or Node and its ServiceAccount is not a dedicated peer account: use the projected token of the agent Pod or wirekube-relay-token issue --peer NAME",
	contract.ReasonIdentityNotAllowed:        "the token's ServiceAccount or namespace is not allowlisted by the gateway: use the agent's ServiceAccount or add it to ext_authz's allowlist",
	contract.ReasonPodNotFound:               "the Pod the token is bound to no longer exists: restart the agent so kubelet mounts a token of the new Pod",
	contract.ReasonPodUIDMismatch:            "the token belongs to an older Pod of the same name: restart the agent so it reads the fresh projected token",
	contract.ReasonPodServiceAccountMismatch: "the bound Pod runs under another ServiceAccount than the token's: use the Pod's own projected token",
	contract.ReasonPodNotScheduled:           "the bound Pod has no node yet: wait until it is scheduled and retry",
	contract.ReasonPodTerminated:             "the Pod the token is bound to has Succeeded or Failed and will never run again: use the token of a running Pod (restart the agent)",
	contract.ReasonNodeMismatch:              "the token's node does not match the bound Pod's node: use the token of the agent on this node",
	contract.ReasonServiceAccountNotFound:    "the token's ServiceAccount was deleted (revoked): issue a new token with wirekube-relay-token issue --peer NAME",
	contract.ReasonPeerNotFound:              "no WireKubePeer exists for this identity (its node name or dedicated peer): create the WireKubePeer or check the node name",
	contract.ReasonKeyHeldByOtherBinding:     "a live session of another identity of this peer (another ServiceAccount, Pod or Node: the agent's, or a per-peer token's) holds the key, and only the same binding may replace it: wait for it to end, stop it, or probe in check mode (without --register)",
	contract.ReasonPeerKeyDuplicate:          "another WireKubePeer holds the same spec.publicKey, so the gateway vouches for neither: find both (kubectl get wkpeer -o custom-columns=NAME:.metadata.name,KEY:.spec.publicKey), restore the right key and rotate the copied one",
	contract.ReasonPeerKeyMoved:              "another existing WireKubePeer held this spec.publicKey first (kubectl describe wkpeer names it in a peer_key_moved Event): restore this node's own key (/var/lib/wirekube/publickey) in its WireKubePeer, or delete the other WireKubePeer if the key is really this node's",
	contract.ReasonTokenSecretBound:          "the token is bound to a Secret, which the gateway cannot follow: use the agent Pod's projected token or wirekube-relay-token issue --peer NAME",
	contract.ReasonPeerKeyInvalid:            "the WireKubePeer's spec.publicKey is not a 32-byte base64 key: fix the peer object (kubectl get wkpeer NAME -o yaml)",
	contract.ReasonIdentityHeaderInvalid:     "the bridge got missing or malformed X-WireKube-* identity headers: fix the proxy config so the ext_authz answer's headers reach the bridge",
	// 403 from the bridge: the identity headers carry no signature it can
	// verify.
	contract.ReasonIdentitySignatureMissing:  "the bridge got identity headers without X-WireKube-Signature: the proxy must pass that header from the ext_authz answer like the others (docs/revocation.md#signing); from anywhere but the proxy this is a forgery attempt",
	contract.ReasonIdentitySignatureInvalid:  "the identity headers' signature does not verify against the keys extauthz published to this bridge: a front that asks another replica's extauthz needs --identity-signing-key-file from one Secret in every replica (docs/revocation.md#signing); otherwise the headers were forged or altered",
	contract.ReasonIdentitySignatureStale:    "the identity headers were signed longer ago than the bridge's --identity-signature-max-age (or in the future): check the clocks of the gateway's nodes and that the proxy does not hold upgrades; retry",
	contract.ReasonIdentitySignatureReplayed: "the identity headers' signature was already used once: a proxy retried the upgrade with the same auth answer, or someone replayed it; retry (a fresh check signs anew)",

	// 503: fail closed, retryable.
	contract.ReasonReviewUnavailable:       "the gateway could not reach the Kubernetes API for TokenReview: retry; check ext_authz's API access and logs",
	contract.ReasonReviewThrottled:         "TokenReview is throttled: retry later; raise ext_authz's API rate limit if it persists",
	contract.ReasonRevocationUnavailable:   "the bridge is not in sync with extauthz's revocation stream, so it admits nobody it cannot vouch for: check extauthz is running in the same Pod and the revocation socket (--revocation-addr, --revocation-secret-file); retry",
	contract.ReasonRelayUnavailable:        "the bridge cannot reach the raw relay: check the relay Service and the bridge's /readyz",
	contract.ReasonAtCapacity:              "the gateway is at its connection limit: retry later or scale the gateway",
	contract.ReasonDraining:                "the gateway replica is shutting down: retry, another replica will take the connection",
	contract.ReasonIdentityReplayCacheFull: "the bridge remembers --identity-replay-cache-size signatures within its max age and none expired yet: retry in a second; raise the size if upgrades come this fast",

	// Recovery and per-identity limits.
	contract.ReasonIdentityReplayPeerShare: "this WireKubePeer was upgraded --identity-replay-peer-share times within the signature max age: another client is dialling with this node's identity in a loop; retry in a second",
	contract.ReasonPeerSessionLimit:        "this WireKubePeer already has --max-sessions-per-peer sessions (its agent is connected): stop the other client using this node's identity, or run the probe without --register",
	contract.ReasonPeerUnregisteredLimit:   "another session of this WireKubePeer is still before its Register: retry in a second; if it persists another client is using this node's identity",
	contract.ReasonRelayWaitFull:           "the bridge already holds --relay-wait-max upgrades while the raw relay is unreachable: check the relay Service and the bridge's /readyz, then retry",
	contract.ReasonBridgeUnavailable:       "the proxy reached no wirekube-bridge (down, restarting or draining): check the bridge container, its logs and the proxy's upstream, then retry",

	// The session listing's bounds.
	contract.ReasonSessionsListBusy: "another /debug/sessions listing of this bridge is being served: retry in a second (one at a time)",
	contract.ReasonSessionsListRate: "more than 10 /debug/sessions listings a second were asked of this bridge: retry in a second, and poll the listing by hand, not from a loop",

	// The front's per-source limit.
	contract.ReasonSourceRateLimited: "this client address made more failed /relay upgrades (no, a malformed or an invalid token) than extauthz's per-address bucket allows (--source-failure-burst, then --source-failure-rate a second): find what keeps failing from this address; a valid token from it is still admitted (docs/monitoring.md)",

	// WebSocket close reasons after the upgrade.
	contract.CloseRegisterTimeout:     "Register was not sent in time after the upgrade: check the client sends Register first and that nothing delays it",
	contract.CloseRegisterMissing:     "the first frame was not Register: the client must send Register before anything else",
	contract.CloseRegisterMalformed:   "the Register body is not a 32-byte key: check --public-key / --private-key-file",
	contract.CloseRegisterKeyMismatch: "the registered key is not this peer's WireKubePeer spec.publicKey: register the peer's own key (compare with kubectl get wkpeer NAME -o jsonpath='{.spec.publicKey}'); after a mismatch the gateway refuses the identity for a doubling window (403 before the upgrade)",
	contract.CloseRegisterRepeated:    "a second Register was sent on the session: reconnect to change keys",
	contract.CloseFrameForbidden:      "a control or relay-to-relay frame type was sent: agents may not send 0x10-0x13 or 0x21-0x23 through the gateway",
	contract.CloseFrameMalformed:      "a frame with length 0 was sent: the client's framing is broken",
	contract.CloseFrameTooLarge:       "a frame over 65,536 bytes was sent: the client's framing is broken",
	contract.CloseTextMessage:         "a text WebSocket message was sent: relay frames must be binary messages",
	contract.CloseRelayLost:           "the bridge lost the raw relay: check the relay Pod and the bridge's /readyz, then retry",
	contract.CloseReplicaFull:         "the replica is past its full mark (--unready-at) and sent this session elsewhere; the agent redials in 1 s: add replicas if it keeps happening (wirekube_bridge_bounced_total)",
	contract.CloseProbeOK:             "the check passed (authorized, relay reachable, key matches the WireKubePeer): nothing to fix",
	contract.ClosePingTimeout:         "the gateway saw no pong in time: check for an idle timeout or a stalled network between client and gateway",
	contract.CloseProtocolError:       "the client broke the WebSocket protocol (unmasked frame, reserved bits or opcode, bad fragmentation): use a conforming WebSocket client or check a proxy that rewrites frames",

	// Results: in the gateway's logs and metrics, never in an answer; an
	// operator reading a log line still gets a hint.
	contract.ResultClientClosed:      "the client closed the session itself: nothing to fix on the gateway; check the client's logs if it was unexpected",
	contract.ResultClientGone:        "the client connection dropped without a close frame: check the network and any proxy idle timeout between client and gateway",
	contract.ResultClientWriteFailed: "the gateway could not write to the client within --write-timeout: the client or the path to it is too slow; only that session ended",
	contract.ResultAllowed:           "nothing to fix: the check allowed the request (every other reason is a deny)",
	contract.ResultBounced:           "nothing to fix on the agent: the replica it reached is past its full mark and sent it elsewhere (close 1013 replica_full); it redials in 1 s. Add replicas if it keeps happening (wirekube_extauthz_checks_total{result=\"bounce\"})",
	contract.ResultCanceled:          "the proxy or client hung up before the check finished: no answer was sent; frequent ones mean the proxy's ext_authz timeout is below --check-timeout",

	// A live session whose authorization ended (docs/revocation.md).
	contract.CloseTokenExpired:    "the session's token expired: the client must reconnect with a fresh token before exp (kubelet rotates projected tokens)",
	contract.ClosePeerKeyChanged:  "the WireKubePeer's spec.publicKey changed while connected: reconnect with the peer's current key",
	contract.CloseRevoked:         "extauthz revoked the session: reconnect; the new upgrade's deny reason tells what no longer holds",
	contract.CloseRevocationLimit: "extauthz already follows --revocation-max-bindings live sessions of this bridge: raise it with bridge.maxSessions (they must be equal) or add replicas",
	contract.CloseRevocationStale: "the bridge lost its revocation stream to extauthz for too long: check extauthz is running and reachable from the bridge (--revocation-addr), then reconnect",
	contract.CloseSessionReplaced: "a newer session registered the same key on this gateway: run one client per key (a second agent or probe with this key replaced this one)",
}

// FixFor returns the one-line fix of a reason code and whether it is known.
func FixFor(r contract.Reason) (string, bool) {
	f, ok := fixes[r]
	return f, ok
}

// fixForStatus is the fallback when an answer carries no known reason.
func fixForStatus(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "the gateway did not accept the token: check it is current and has audience wirekube-relay"
	case http.StatusForbidden:
		return "the gateway refused this identity: check ext_authz's logs for the reason"
	case http.StatusServiceUnavailable:
		return "the gateway is temporarily unavailable: retry"
	case http.StatusNotFound:
		return "no relay endpoint at this path: the gateway serves " + contract.DefaultRelayPath
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		return "the proxy could not reach ext_authz or the bridge: check those services and the proxy's upstream config"
	case http.StatusInternalServerError:
		return "the proxy answered 500: with nginx auth_request, map the auth service's status back (docs/spec.md#nginx)"
	default:
		return "the endpoint did not upgrade to WebSocket: check --url points at the relay gateway"
	}
}

// fixForCloseCode is the fallback for a close without a known reason text.
func fixForCloseCode(code int) string {
	switch code {
	case 1001:
		return fixes[contract.CloseDraining]
	case 1006:
		return "the connection dropped without a close frame: check proxies' idle timeouts and the gateway's logs"
	case 1009:
		return fixes[contract.CloseFrameTooLarge]
	case 1011:
		return fixes[contract.CloseRelayLost]
	default:
		return "the gateway closed the session: check the bridge's logs for the reason"
	}
}

// sanitize makes text from the network safe to print: printable ASCII only,
// at most max bytes.
func sanitize(s string, max int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= max {
			break
		}
		if r >= 0x20 && r < 0x7f {
			b.WriteRune(r)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}
