package envoy

import (
	"errors"
	"fmt"
	"slices"
	"time"

	localrlv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/wirekube/relay-ws/internal/contract"
)

// The per-source upgrade limit, written down from the sizing in
// docs/deploy.md#per-source-limits, not read from the config: off (it counts
// an agent's upgrades with a stranger's, so where agents share an address a
// tokenless flood would refuse them all), and sized for where it is turned
// on: a burst of the bridge's --max-sessions (a whole replica's agents
// behind one NAT address reconnecting at once), then 200 a second, one
// bucket for each address that can hold a connection (the overload
// manager's 25000).
const (
	localRateLimitFilter  = "envoy.filters.http.local_ratelimit"
	sourceBurst           = bridgeMaxSessions
	sourceTokensPerSecond = 200
	sourceBuckets         = 25000
	sourceLimitRuntimeKey = "relay_per_source_enabled"
)

// sourceLimitProperties: the per-address limit of /relay upgrades is off
// unless turned on, and then has the contract's answer; nothing else is
// limited.
func sourceLimitProperties() []property {
	return []property{
		{"relay_per_source_limit_present", checkSourceLimit, func(v *view) {
			delete(v.route("relay").TypedPerFilterConfig, localRateLimitFilter)
		}},
		{"relay_per_source_limit_wildcard", checkSourceLimit, func(v *view) {
			// A fixed value is one bucket for that address only: every other
			// address would go unlimited.
			setRelayLimit(v, func(l *localrlv3.LocalRateLimit) { l.Descriptors[0].Entries[0].Value = "10.0.0.1" })
		}},
		{"relay_per_source_limit_from_remote_address", checkSourceLimit, func(v *view) {
			setRelayLimit(v, func(l *localrlv3.LocalRateLimit) { l.RateLimits = nil })
		}},
		{"relay_per_source_limit_enforced", checkSourceLimit, func(v *view) {
			// Envoy's default is 0 % enforced: a missing filter_enforced is
			// a limit that only counts once turned on.
			setRelayLimit(v, func(l *localrlv3.LocalRateLimit) { l.FilterEnforced = nil })
		}},
		{"relay_per_source_limit_off_by_default", checkSourceLimit, func(v *view) {
			// On for every request, it refuses agents behind the address a
			// tokenless flooder shares with them.
			setRelayLimit(v, func(l *localrlv3.LocalRateLimit) {
				l.FilterEnabled.DefaultValue = &typev3.FractionalPercent{Numerator: 100, Denominator: typev3.FractionalPercent_HUNDRED}
			})
		}},
		{"relay_per_source_limit_runtime_key", checkSourceLimit, func(v *view) {
			// The documented way to turn it on where addresses are the
			// clients' own.
			setRelayLimit(v, func(l *localrlv3.LocalRateLimit) { l.FilterEnabled.RuntimeKey = "other" })
		}},
		{"relay_per_source_limit_sized", checkSourceLimit, func(v *view) {
			setRelayLimit(v, func(l *localrlv3.LocalRateLimit) { l.Descriptors[0].TokenBucket.MaxTokens = 100 })
		}},
		{"relay_per_source_limit_buckets", checkSourceLimit, func(v *view) {
			// Envoy's default keeps 20 buckets: the 21st address resets one.
			setRelayLimit(v, func(l *localrlv3.LocalRateLimit) { l.MaxDynamicDescriptors = nil })
		}},
		{"relay_per_source_limit_process_wide", checkSourceLimit, func(v *view) {
			// Wildcard buckets do not work per connection (ratelimit.proto).
			setRelayLimit(v, func(l *localrlv3.LocalRateLimit) { l.LocalRateLimitPerDownstreamConnection = true })
		}},
		{"relay_per_source_limit_reason", checkSourceLimit, func(v *view) {
			setRelayLimit(v, func(l *localrlv3.LocalRateLimit) { l.ResponseHeadersToAdd = l.ResponseHeadersToAdd[1:] })
		}},
		{"per_source_limit_only_on_relay", checkLimitOnlyOnRelay, func(v *view) {
			v.route("healthz").TypedPerFilterConfig[localRateLimitFilter] = v.route("relay").TypedPerFilterConfig[localRateLimitFilter]
		}},
	}
}

// relayLimit decodes the relay route's per-route local rate limit and runs
// its proto constraints (ValidateAll does not look inside an Any).
func relayLimit(v *view) (*localrlv3.LocalRateLimit, error) {
	a, ok := v.route("relay").GetTypedPerFilterConfig()[localRateLimitFilter]
	if !ok {
		return nil, errors.New("relay route has no per-route local rate limit")
	}
	l := &localrlv3.LocalRateLimit{}
	if err := a.UnmarshalTo(l); err != nil {
		return nil, fmt.Errorf("relay route local rate limit: %w", err)
	}
	if err := l.ValidateAll(); err != nil {
		return nil, fmt.Errorf("relay route local rate limit: %w", err)
	}
	return l, nil
}

// setRelayLimit changes the relay route's limit in place (the view's Any).
// A config that does not decode loses the limit, which checkSourceLimit
// reports as missing.
func setRelayLimit(v *view, change func(*localrlv3.LocalRateLimit)) {
	pf := v.route("relay").TypedPerFilterConfig
	l := &localrlv3.LocalRateLimit{}
	if err := pf[localRateLimitFilter].UnmarshalTo(l); err != nil {
		delete(pf, localRateLimitFilter)
		return
	}
	change(l)
	b, err := anypb.New(l)
	if err != nil {
		delete(pf, localRateLimitFilter)
		return
	}
	pf[localRateLimitFilter] = b
}

func checkSourceLimit(v *view) error {
	l, err := relayLimit(v)
	if err != nil {
		return err
	}
	en := l.GetFilterEnabled()
	return errors.Join(
		errIf(en.GetDefaultValue().GetNumerator() != 0 || en.GetRuntimeKey() != sourceLimitRuntimeKey,
			"relay rate limit enabled %v, want 0 %% by default under runtime key %s", en, sourceLimitRuntimeKey),
		errIf(!fullPercent(l.GetFilterEnforced().GetDefaultValue()),
			"relay rate limit enforced %v, want 100 %% of the requests it is enabled for", l.GetFilterEnforced()),
		errIf(l.GetLocalRateLimitPerDownstreamConnection(), "relay rate limit is per connection: wildcard buckets need the process-wide limit"),
		checkSourceDescriptor(l),
		errIf(l.GetMaxDynamicDescriptors().GetValue() != sourceBuckets,
			"max_dynamic_descriptors %v, want %d (one bucket per connection the overload manager admits)", l.GetMaxDynamicDescriptors(), sourceBuckets),
		errIf(l.GetAlwaysConsumeDefaultTokenBucket() == nil || l.GetAlwaysConsumeDefaultTokenBucket().GetValue(),
			"always_consume_default_token_bucket %v, want false (the route's default bucket would be one global bucket)", l.GetAlwaysConsumeDefaultTokenBucket()),
		checkSourceAnswer(l))
}

// checkSourceDescriptor: the descriptors come from the client address only,
// and the only descriptor is the blank-valued (one bucket per value)
// remote_address with the documented size.
func checkSourceDescriptor(l *localrlv3.LocalRateLimit) error {
	rl := l.GetRateLimits()
	if len(rl) != 1 || len(rl[0].GetActions()) != 1 || rl[0].GetActions()[0].GetRemoteAddress() == nil {
		return fmt.Errorf("relay rate limit actions %v, want exactly [remote_address]", rl)
	}
	d := l.GetDescriptors()
	if len(d) != 1 || len(d[0].GetEntries()) != 1 {
		return fmt.Errorf("relay rate limit descriptors %v, want one with one entry", d)
	}
	e, tb := d[0].GetEntries()[0], d[0].GetTokenBucket()
	return errors.Join(
		errIf(e.GetKey() != "remote_address" || e.GetValue() != "", "descriptor entry %s=%q, want remote_address with a blank value", e.GetKey(), e.GetValue()),
		errIf(tb.GetMaxTokens() != sourceBurst || tb.GetTokensPerFill().GetValue() != sourceTokensPerSecond ||
			tb.GetFillInterval().AsDuration() != time.Second,
			"per-source bucket %v, want %d tokens, %d per 1s", tb, sourceBurst, sourceTokensPerSecond))
}

// checkSourceAnswer: 429 (Envoy's default status) with the reason code,
// Retry-After and Cache-Control: no-store, as every deny (docs/spec.md).
func checkSourceAnswer(l *localrlv3.LocalRateLimit) error {
	added := map[string]string{}
	for _, h := range l.GetResponseHeadersToAdd() {
		added[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	st := l.GetStatus().GetCode()
	return errors.Join(
		errIf(st != 0 && st != typev3.StatusCode_TooManyRequests, "relay rate limit status %v, want 429", st),
		errIf(added["x-wirekube-deny-reason"] != string(contract.ReasonSourceRateLimited),
			"limited upgrade answers deny reason %q, want %s", added["x-wirekube-deny-reason"], contract.ReasonSourceRateLimited),
		errIf(added["cache-control"] != "no-store", "limited upgrade without Cache-Control: no-store"),
		errIf(!l.GetEnableRetryAfterHeader(), "limited upgrade without Retry-After"))
}

// checkLimitOnlyOnRelay: the connection manager's filter limits nothing by
// itself (no bucket, Envoy's default of 0 % enabled) and no other route turns
// it on, so kubelet probes from a node address shared with agents behind an
// SNAT are never refused.
func checkLimitOnlyOnRelay(v *view) error {
	var errs []error
	i := slices.Index(v.filters, localRateLimitFilter)
	if i < 0 {
		return errors.New("no local rate limit filter in the connection manager")
	}
	l := &localrlv3.LocalRateLimit{}
	if err := v.hcm.GetHttpFilters()[i].GetTypedConfig().UnmarshalTo(l); err != nil {
		return fmt.Errorf("local rate limit filter: %w", err)
	}
	errs = append(errs, errIf(l.GetTokenBucket() != nil || l.GetFilterEnabled() != nil || len(l.GetDescriptors()) > 0,
		"the connection manager's local rate limit applies to every route: %v", l))
	for _, r := range v.routes {
		_, on := r.GetTypedPerFilterConfig()[localRateLimitFilter]
		errs = append(errs, errIf(on != (r.GetName() == "relay"), "route %s: per-route local rate limit %v, want it on /relay only", r.GetName(), on))
	}
	return errors.Join(errs...)
}

func fullPercent(p *typev3.FractionalPercent) bool {
	return p.GetNumerator() == 100 && p.GetDenominator() == typev3.FractionalPercent_HUNDRED
}
