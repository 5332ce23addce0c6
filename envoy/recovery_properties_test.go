package envoy

import (
	"errors"
	"slices"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/wirekube/relay-ws/internal/contract"
)

// recoveryProperties (issue 14): no bare upstream error, and a refused
// connect moves to another bridge endpoint.
func recoveryProperties() []property {
	return []property{
		{"bridge_unavailable_local_reply", checkBridgeUnavailable, func(v *view) {
			v.hcm.LocalReplyConfig.Mappers = nil
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
		reason := ""
		for _, h := range m.GetHeadersToAdd() {
			if h.GetHeader().GetKey() == "x-wirekube-deny-reason" {
				reason = h.GetHeader().GetValue()
			}
		}
		if slices.Contains(flags, "UF") && slices.Contains(flags, "UH") && !slices.Contains(flags, "UAEX") &&
			m.GetStatusCode().GetValue() == 503 && reason == string(contract.ReasonBridgeUnavailable) {
			return nil
		}
	}
	return errors.New("no local_reply_config mapper turns UF/UH (and not UAEX) into 503 bridge_unavailable")
}
