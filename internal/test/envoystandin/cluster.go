package envoystandin

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// bridgeCluster is what envoy.yaml's bridge cluster and relay route make
// Envoy do with the upstream: round robin over the endpoints, a 1 s
// connect_timeout, and (retry_policy retry_on connect-failure, num_retries
// 1, retry_host_predicate previous_hosts) one retry on another endpoint
// when a connect fails. A draining bridge closes its listener first, so
// its upgrades move to the other endpoint.
type bridgeCluster struct {
	endpoints []string
	next      atomic.Uint64
	dialer    net.Dialer
}

func newBridgeCluster(endpoints []string) *bridgeCluster {
	return &bridgeCluster{endpoints: endpoints, dialer: net.Dialer{Timeout: time.Second}}
}

// transport proxies over fresh connections (an upgraded one is never
// reused) dialed by the cluster.
func (c *bridgeCluster) transport() *http.Transport {
	return &http.Transport{DialContext: c.dial, DisableKeepAlives: true, ResponseHeaderTimeout: 0}
}

// dial connects to the next endpoint, or after a connect failure to the
// one after it (previous_hosts: never the same endpoint twice).
func (c *bridgeCluster) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	first := int(c.next.Add(1)-1) % len(c.endpoints)
	attempts := min(2, len(c.endpoints)) // the first try and num_retries: 1
	var errs []error
	for i := range attempts {
		conn, err := c.dialer.DialContext(ctx, network, c.endpoints[(first+i)%len(c.endpoints)])
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// bridgeUnavailable is envoy.yaml's local_reply_config mapping of an
// upstream failure (response flags UF, UH, URX, UC): 503 with the reason,
// Retry-After and Cache-Control as the mapper's headers_to_add.
func bridgeUnavailable(w http.ResponseWriter) {
	h := w.Header()
	h.Set(contract.HeaderDenyReason, string(contract.ReasonBridgeUnavailable))
	h.Set("Retry-After", "1")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(string(contract.ReasonBridgeUnavailable) + "\n"))
}
