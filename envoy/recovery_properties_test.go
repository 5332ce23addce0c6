package envoy

import (
	"errors"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/wirekube/relay-ws/internal/contract"
)

// recoveryProperties: no bare upstream error, and a refused
// connect moves to another bridge endpoint.
func recoveryProperties() []property {
	return []property{
		{"bridge_unavailable_local_reply", checkBridgeUnavailable, func(v *view) {
			v.hcm.LocalReplyConfig.Mappers = nil
		}},
		{"bridge_unavailable_not_cached", checkBridgeUnavailable, func(v *view) {
			// Every deny carries Cache-Control: no-store (docs/spec.md).
			for _, m := range v.hcm.LocalReplyConfig.Mappers {
				m.HeadersToAdd = slices.DeleteFunc(m.HeadersToAdd, func(h *corev3.HeaderValueOption) bool {
					return h.GetHeader().GetKey() == "cache-control"
				})
			}
		}},
		{"relay_route_retries_connect_failure", func(v *view) error {
			rp := v.route("relay").GetRoute().GetRetryPolicy()
			hosts := slices.ContainsFunc(rp.GetRetryHostPredicate(), func(p *routev3.RetryPolicy_RetryHostPredicate) bool {
				return p.GetName() == "envoy.retry_host_predicates.previous_hosts"
			})
			return errors.Join(
				errIf(rp.GetRetryOn() != "connect-failure", "relay route retry_on %q, want connect-failure only", rp.GetRetryOn()),
				errIf(rp.GetNumRetries().GetValue() != 1, "relay route num_retries %d, want 1", rp.GetNumRetries().GetValue()),
				errIf(!hosts, "relay route retries without the previous_hosts predicate"))
		}, func(v *view) { v.route("relay").GetRoute().RetryPolicy.RetryOn = "5xx" }},
	}
}

func checkBridgeUnavailable(v *view) error {
	for _, m := range v.hcm.GetLocalReplyConfig().GetMappers() {
		flags := m.GetFilter().GetResponseFlagFilter().GetFlags()
		added := map[string]string{}
		for _, h := range m.GetHeadersToAdd() {
			added[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		if slices.Contains(flags, "UF") && slices.Contains(flags, "UH") && !slices.Contains(flags, "UAEX") &&
			m.GetStatusCode().GetValue() == 503 && added["x-wirekube-deny-reason"] == string(contract.ReasonBridgeUnavailable) &&
			added["cache-control"] == "no-store" {
			return nil
		}
	}
	return errors.New("no local_reply_config mapper turns UF/UH (and not UAEX) into 503 bridge_unavailable with Cache-Control: no-store")
}
