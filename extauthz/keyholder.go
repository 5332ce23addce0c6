package extauthz

import (
	"strings"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// keyHolders reports a live session's binding, other than b, that holds
// b's key. Safe for concurrent use.
type keyHolders interface {
	OtherHolder(b revocation.Binding) (revocation.Binding, bool)
}

// checkKeyHolder refuses an allowed relay upgrade with
// key_held_by_other_binding when a live session of another binding holds
// its key on a bridge streaming to this extauthz (docs/revocation.md#replacement):
// only a session of the same binding (the agent's reconnect) may replace
// it. It sees only those bridges; the bridge checks its own sessions too.
func (a *Authorizer) checkKeyHolder(d Decision) Decision {
	if a.holders == nil {
		return d
	}
	other, ok := a.holders.OtherHolder(d.binding)
	if !ok {
		return d
	}
	return Decision{Reason: contract.ReasonKeyHeldByOtherBinding, Peer: d.Peer, KeyFingerprint: d.KeyFingerprint,
		Detail: "key held by a live session of " + describeBinding(other)}
}

// describeBinding names a binding for a log line: identity, peer, Pod and
// Node; never the key hash.
func describeBinding(b revocation.Binding) string {
	s := "identity " + b.Identity + " peer " + b.Peer
	if b.PodName != "" {
		s += " pod " + b.PodName
	}
	if b.NodeName != "" {
		s += " node " + b.NodeName
	}
	return s
}

// probeOnly mirrors the bridge's session kind (bridge/probemode.go): the
// probe subprotocol offered and the relay one not.
func probeOnly(offered []string) bool {
	probe := false
	for _, v := range offered {
		for p := range strings.SplitSeq(v, ",") {
			switch strings.TrimSpace(p) {
			case contract.Subprotocol:
				return false
			case contract.SubprotocolProbe:
				probe = true
			}
		}
	}
	return probe
}
