package binding

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wirekube/relay-ws/internal/contract"
)

// noObjects is a cache that holds nothing.
type noObjects struct{}

func (noObjects) Pod(string, string) (*corev1.Pod, bool)                       { return nil, false }
func (noObjects) ServiceAccount(string, string) (*corev1.ServiceAccount, bool) { return nil, false }
func (noObjects) Node(string) (*corev1.Node, bool)                             { return nil, false }
func (noObjects) PeerKey(string) (string, bool)                                { return "", false }
func (noObjects) PeersWithKey(string) []string                                 { return nil }

// defaultRules are the rules of the flags' defaults, with
// monitoring/prometheus allowlisted.
func defaultRules(objs Objects) *Rules {
	return New(Config{
		Agents:        map[ServiceAccount]bool{{"wirekube-system", "wirekube-agent"}: true},
		PeerNamespace: "wirekube-system", PeerPrefix: "wirekube-relay-peer-",
		Allowed: map[ServiceAccount]bool{{"monitoring", "prometheus"}: true},
	}, objs, nil)
}

// TestPrefilterAgreesWithBindPeer: for every ServiceAccount name, the
// prefilter refuses exactly those the relay path's rules answer
// identity_not_allowed after a review.
func TestPrefilterAgreesWithBindPeer(t *testing.T) {
	r := defaultRules(noObjects{})
	names := []ServiceAccount{
		{"wirekube-system", "wirekube-agent"}, {"wirekube-system", "wirekube-relay-peer-node-b"},
		{"wirekube-system", "wirekube-relay-peer-x"}, {"wirekube-system", "wirekube-relay-peer-"},
		{"wirekube-system", "wirekube-relay-pee"}, {"wirekube-system", "other"}, {"default", "wirekube-agent"},
		{"default", "wirekube-relay-peer-node-b"}, {"monitoring", "prometheus"}, {"kube-system", "default"},
	}
	for _, n := range names {
		username := UsernamePrefix + n.Namespace + ":" + n.Name
		byRules := r.BindPeer(&Subject{Username: username, UID: "uid"}).Reason == contract.ReasonIdentityNotAllowed
		byPrefilter := !r.Admissible(username, "", "", false)
		if byRules != byPrefilter {
			t.Errorf("%s: refused by the rules %v, by the prefilter %v", username, byRules, byPrefilter)
		}
	}
}
