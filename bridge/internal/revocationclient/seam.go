package revocationclient

import "github.com/prometheus/client_golang/prometheus"

// This file is the test seam of the bridge's tests, which run a whole
// Server and so cannot live in this package: the client's collectors.
// Nothing outside tests calls it.

// Connected is wirekube_bridge_revocation_stream_connected.
func (r *Client) Connected() prometheus.Gauge { return r.m.connected }

// Resyncs is wirekube_bridge_revocation_resyncs_total.
func (r *Client) Resyncs() prometheus.Counter { return r.m.resyncs }

// Lag is wirekube_bridge_revocation_lag_seconds.
func (r *Client) Lag() prometheus.Histogram { return r.m.lag }

// AuthCloses is wirekube_bridge_authorization_closes_total{cause}.
func (r *Client) AuthCloses(cause string) prometheus.Counter {
	return r.m.authCloses.WithLabelValues(cause)
}
