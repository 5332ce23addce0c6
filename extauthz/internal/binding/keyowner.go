package binding

import "github.com/wirekube/relay-ws/internal/contract"

// keyMoved refuses res's key on res's peer when another owner, still
// existing, published it first (peer_key_moved): the Result names the
// owner, so that its WireKubePeer (or, while that is gone, its Node) gets
// an Event too. Without key owners nothing is refused as moved.
func (r *Rules) keyMoved(res *Result) bool {
	if r.owners == nil {
		return false
	}
	owner, moved := r.owners.KeyOwner(res.Peer, res.Key)
	if !moved {
		return false
	}
	res.Reason, res.Detail, res.FirstHolder = contract.ReasonPeerKeyMoved, "key first published by "+owner.String(), owner.Name()
	return true
}
