package extauthz

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/extauthz/internal/keyhistory"
	"github.com/wirekube/relay-ws/extauthz/internal/kubewatch"
	"github.com/wirekube/relay-ws/relayproto"
)

// KeyOwner reports the owner of key that forbids it to WireKubePeer peer
// (internal/keyhistory): a Node or WireKubePeer other than the owner of peer's
// cached object that published key first and still exists. The owner is
// read from the cache, not from the history, so a peer created a moment
// ago is judged as its own owner before the history has seen it.
func (in *Informers) KeyOwner(peer string, key relayproto.Key) (keyhistory.Owner, bool) {
	u, ok := kubewatch.Get[*unstructured.Unstructured](in.peers, peer)
	if in.history == nil || !ok {
		return keyhistory.Owner{}, false
	}
	return in.history.Refusal(keyhistory.OwnerOf(u), key)
}

// KeyHistorySize is the number of keys whose owners are remembered.
func (in *Informers) KeyHistorySize() int {
	if in.history == nil {
		return 0
	}
	return in.history.Size()
}

// registerKeyHistoryMetric registers wirekube_extauthz_peer_key_history_keys,
// read from size at scrape time.
func registerKeyHistoryMetric(reg prometheus.Registerer, size func() int) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: metricsNamespace, Name: "peer_key_history_keys",
		Help: "Public keys whose owner (the Node or WireKubePeer that published them first) extauthz remembers " +
			"(at most 4 per owner; peer_key_moved).",
	}, func() float64 { return float64(size()) }))
}
