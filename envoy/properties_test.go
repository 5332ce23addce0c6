package envoy

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

// Numbers the config must agree with (the other binaries' defaults).
const (
	extauthzCheckTimeout = 2 * time.Second // wirekube-extauthz --check-timeout
	agentKeepalive       = 25 * time.Second
	bridgeMaxSessions    = 20000 // wirekube-bridge --max-sessions
	extauthzGRPCAddr     = "127.0.0.1:9001"
	bridgeAddr           = "127.0.0.1:8081"
	maxBufferBytes       = 1 << 20
)

// property is one protection a shipped config must keep. breakIt removes the
// protection from a copy, and the test shows that check then fails: a check
// that cannot fail proves nothing.
type property struct {
	name    string
	check   func(v *view) error
	breakIt func(v *view)
}

func errIf(cond bool, format string, args ...any) error {
	if cond {
		return fmt.Errorf(format, args...)
	}
	return nil
}

func properties() []property {
	return slices.Concat(listenerProperties(), filterProperties(), routeProperties(), limitProperties(), recoveryProperties(),
		sourceLimitProperties())
}

func listenerProperties() []property {
	return []property{
		{"admin_on_loopback", func(v *view) error {
			ap, err := socketAddr(v.boot.GetAdmin().GetAddress().GetSocketAddress())
			if err != nil {
				return err
			}
			return errIf(!ap.Addr().IsLoopback(), "admin listens on %s", ap)
		}, func(v *view) { v.boot.GetAdmin().GetAddress().GetSocketAddress().Address = "0.0.0.0" }},
		{"tls_listener", checkTLS, func(v *view) {
			if v.tls != nil {
				v.tls.CommonTlsContext.TlsParams.TlsMinimumProtocolVersion = tlsv3.TlsParameters_TLSv1_0
			} else {
				v.relay.Name = "relay_tls"
			}
		}},
		{"websocket_upgrade", func(v *view) error {
			ok := slices.ContainsFunc(v.hcm.GetUpgradeConfigs(), func(u *hcmv3.HttpConnectionManager_UpgradeConfig) bool {
				return u.GetUpgradeType() == "websocket" && (u.GetEnabled() == nil || u.GetEnabled().GetValue())
			})
			return errIf(!ok, "http connection manager has no websocket upgrade")
		}, func(v *view) { v.hcm.UpgradeConfigs = nil }},
		{"underscore_headers_rejected", func(v *view) error {
			a := v.hcm.GetCommonHttpProtocolOptions().GetHeadersWithUnderscoresAction()
			return errIf(a != corev3.HttpProtocolOptions_REJECT_REQUEST, "headers_with_underscores_action %v", a)
		}, func(v *view) {
			v.hcm.CommonHttpProtocolOptions.HeadersWithUnderscoresAction = corev3.HttpProtocolOptions_ALLOW
		}},
		{"small_header_limits", func(v *view) error {
			kb := v.hcm.GetMaxRequestHeadersKb()
			n := v.hcm.GetCommonHttpProtocolOptions().GetMaxHeadersCount()
			return errors.Join(errIf(kb == nil || kb.GetValue() > 16, "max_request_headers_kb %v, want <= 16", kb),
				errIf(n == nil || n.GetValue() > 100, "max_headers_count %v, want <= 100", n),
				errIf(v.hcm.GetRequestHeadersTimeout().AsDuration() <= 0, "request_headers_timeout unset"))
		}, func(v *view) { v.hcm.MaxRequestHeadersKb = wrapperspb.UInt32(96) }},
		{"path_normalization", func(v *view) error {
			a := v.hcm.GetPathWithEscapedSlashesAction()
			return errors.Join(errIf(!v.hcm.GetNormalizePath().GetValue(), "normalize_path off"),
				errIf(!v.hcm.GetMergeSlashes(), "merge_slashes off"),
				errIf(a != hcmv3.HttpConnectionManager_REJECT_REQUEST && a != hcmv3.HttpConnectionManager_UNESCAPE_AND_REDIRECT,
					"path_with_escaped_slashes_action %v", a))
		}, func(v *view) { v.hcm.MergeSlashes = false }},
		{"forwarded_for", func(v *view) error {
			want := uint32(0) // TLS: clients connect directly
			if v.tls == nil {
				want = 1 // plaintext: behind exactly one TLS terminator
			}
			return errors.Join(errIf(!v.hcm.GetUseRemoteAddress().GetValue(), "use_remote_address off"),
				errIf(v.hcm.GetXffNumTrustedHops() != want, "xff_num_trusted_hops %d, want %d", v.hcm.GetXffNumTrustedHops(), want))
		}, func(v *view) { v.hcm.XffNumTrustedHops = 5 }},
		{"access_log_without_secrets", checkAccessLog, func(v *view) {
			v.accessLog[0].GetLogFormat().GetJsonFormat().Fields["auth"] = structpb.NewStringValue("%REQ(AUTHORIZATION)%")
		}},
		{"access_log_route_not_path", checkAccessLogRoute, func(v *view) {
			v.accessLog[0].GetLogFormat().GetJsonFormat().Fields["route"] = structpb.NewStringValue("%REQ(:PATH)%")
		}},
		{"access_log_no_client_text", checkAccessLogCommands, func(v *view) {
			v.accessLog[0].GetLogFormat().GetJsonFormat().Fields["ua"] = structpb.NewStringValue("%REQ(USER-AGENT)%")
		}},
		{"tls_handshake_timeout", func(v *view) error {
			var errs []error
			for _, fc := range v.relay.GetFilterChains() {
				d := fc.GetTransportSocketConnectTimeout().AsDuration()
				errs = append(errs, errIf(d <= 0 || d > 10*time.Second,
					"transport_socket_connect_timeout %v, want set and at most 10s", d))
			}
			return errors.Join(errs...)
		}, func(v *view) { v.relay.GetFilterChains()[0].TransportSocketConnectTimeout = nil }},
		{"request_headers_timeout", func(v *view) error {
			d := v.hcm.GetRequestHeadersTimeout().AsDuration()
			return errIf(d <= 0 || d > 30*time.Second, "request_headers_timeout %v, want set and at most 30s", d)
		}, func(v *view) { v.hcm.RequestHeadersTimeout = nil }},
	}
}

// accessLogCommands are the only command operators an access log may use:
// values Envoy sets itself, the route's name, and the headers ext_authz's
// answer sets (the client's own X-WireKube-* are removed first). The request
// id is cut to a UUID's length: a client may supply one on an internal
// request. Anything else (path, Host, User-Agent, cookies, any other
// header) is text a client writes freely, where a token could ride.
var accessLogCommands = map[string]bool{
	"%START_TIME%": true, "%REQ(:METHOD)%": true, "%ROUTE_NAME%": true, "%RESPONSE_CODE%": true,
	"%RESPONSE_FLAGS%": true, "%RESPONSE_CODE_DETAILS%": true, "%RESP(X-WIREKUBE-DENY-REASON)%": true,
	"%REQ(X-WIREKUBE-PEER)%": true, "%REQ(X-WIREKUBE-IDENTITY)%": true, "%DURATION%": true,
	"%BYTES_RECEIVED%": true, "%BYTES_SENT%": true, "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%": true,
	"%REQ(X-REQUEST-ID):36%": true,
}

var commandRE = regexp.MustCompile(`%[A-Z_]+(\([^)%]*\))?(:[0-9]+)?%`)

func checkAccessLogCommands(v *view) error {
	var errs []error
	for _, al := range v.accessLog {
		f := formatText(al)
		for _, c := range commandRE.FindAllString(f, -1) {
			errs = append(errs, errIf(!accessLogCommands[strings.ToUpper(c)], "access log command %s is not on the allowed list", c))
		}
		rest := commandRE.ReplaceAllString(f, "")
		errs = append(errs, errIf(strings.Contains(rest, "%"), "access log format has a command the check cannot read: %s", rest))
	}
	return errors.Join(errs...)
}

func checkAccessLogRoute(v *view) error {
	var errs []error
	for _, al := range v.accessLog {
		r := al.GetLogFormat().GetJsonFormat().GetFields()["route"].GetStringValue()
		errs = append(errs, errIf(r != "%ROUTE_NAME%", "access log route field %q, want %%ROUTE_NAME%%", r))
	}
	return errors.Join(errs...)
}

func checkTLS(v *view) error {
	if !strings.HasSuffix(v.relay.GetName(), "_tls") {
		return errIf(v.tls != nil, "plaintext listener %s has TLS", v.relay.GetName())
	}
	if v.tls == nil {
		return fmt.Errorf("listener %s has no TLS", v.relay.GetName())
	}
	ctx := v.tls.GetCommonTlsContext()
	files, err := tlsCertFiles(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		errs = append(errs, errIf(!strings.HasPrefix(f, "/etc/envoy/tls/"), "certificate file %s is not under /etc/envoy/tls/ (the mounted Secret)", f))
	}
	return errors.Join(append(errs,
		errIf(ctx.GetTlsParams().GetTlsMinimumProtocolVersion() < tlsv3.TlsParameters_TLSv1_2, "TLS minimum below 1.2"),
		errIf(!slices.Equal(ctx.GetAlpnProtocols(), []string{"http/1.1"}), "alpn %v, want [http/1.1]", ctx.GetAlpnProtocols()))...)
}

// tlsCertFiles returns the certificate chain and key files a TLS context
// reads, inline or through the shipped file-based SDS resource (which must
// be where the config looks for it, and watched so renewals load).
func tlsCertFiles(ctx *tlsv3.CommonTlsContext) ([]string, error) {
	if certs := ctx.GetTlsCertificates(); len(certs) > 0 {
		if len(certs) != 1 || len(ctx.GetTlsCertificateSdsSecretConfigs()) > 0 {
			return nil, errors.New("want exactly one certificate")
		}
		return []string{certs[0].GetCertificateChain().GetFilename(), certs[0].GetPrivateKey().GetFilename()}, nil
	}
	sds := ctx.GetTlsCertificateSdsSecretConfigs()
	if len(sds) != 1 {
		return nil, fmt.Errorf("%d SDS certificate configs, want 1", len(sds))
	}
	pcs := sds[0].GetSdsConfig().GetPathConfigSource()
	if pcs.GetPath() != envoyconfig.SDSConfigMountPath || pcs.GetWatchedDirectory().GetPath() != path.Dir(envoyconfig.SDSConfigMountPath) {
		return nil, fmt.Errorf("SDS from %q watching %q, want %s watching its directory", pcs.GetPath(), pcs.GetWatchedDirectory().GetPath(), envoyconfig.SDSConfigMountPath)
	}
	data, err := envoyconfig.Shipped(envoyconfig.SDSConfig)
	if err != nil {
		return nil, err
	}
	secrets, err := envoyconfig.DecodeSDS(data)
	if err != nil {
		return nil, err
	}
	for _, sec := range secrets {
		if sec.GetName() != sds[0].GetName() {
			continue
		}
		c := sec.GetTlsCertificate()
		chain, key := c.GetCertificateChain().GetFilename(), c.GetPrivateKey().GetFilename()
		if w := c.GetWatchedDirectory().GetPath(); w != path.Dir(chain) || w != path.Dir(key) {
			return nil, fmt.Errorf("SDS secret %q watches %q, not the certificate's directory: a renewed Secret would not load", sec.GetName(), w)
		}
		return []string{chain, key}, nil
	}
	return nil, fmt.Errorf("%s defines no secret %q", envoyconfig.SDSConfig, sds[0].GetName())
}

func checkAccessLog(v *view) error {
	if len(v.accessLog) == 0 {
		return errors.New("no access log")
	}
	var errs []error
	for _, al := range v.accessLog {
		f := strings.ToUpper(formatText(al))
		for _, bad := range []string{"AUTHORIZATION", "PUBLIC-KEY", "COOKIE", ":PATH", "%PATH%", "X-ENVOY-ORIGINAL-PATH", "REQ_WITHOUT_QUERY", ":AUTHORITY", "HOST"} {
			errs = append(errs, errIf(strings.Contains(f, bad), "access log format contains %s", bad))
		}
		errs = append(errs, errIf(!strings.Contains(f, "%RESPONSE_CODE%"), "access log has no status"))

	}
	return errors.Join(errs...)
}

func filterProperties() []property {
	return []property{
		{"header_mutation_first", func(v *view) error {
			if len(v.filters) == 0 || v.filters[0] != "envoy.filters.http.header_mutation" || v.mutation == nil {
				return fmt.Errorf("first http filter is %v, want envoy.filters.http.header_mutation", v.filters)
			}
			var errs []error
			names := append(slices.Clone(contract.IdentityHeaders), contract.HeaderDenyReason, "X-WireKube-Anything-New")
			for _, h := range names {
				errs = append(errs, errIf(!v.removes(h), "client header %s not removed before ext_authz", h))
			}
			return errors.Join(errs...)
		}, func(v *view) { v.mutation.Mutations.RequestMutations = v.mutation.Mutations.RequestMutations[2:] }},
		{"filter_order", func(v *view) error {
			// The rate limit before ext_authz: a limited upgrade costs no Check.
			want := []string{"envoy.filters.http.header_mutation", localRateLimitFilter, "envoy.filters.http.ext_authz", "envoy.filters.http.router"}
			return errIf(!slices.Equal(v.filters, want), "http filters %v, want %v", v.filters, want)
		}, func(v *view) { v.filters[0], v.filters[1] = v.filters[1], v.filters[0] }},
		{"ext_authz_grpc_loopback_http2", func(v *view) error {
			c := v.authz.GetGrpcService().GetEnvoyGrpc().GetClusterName()
			ep, err := v.endpoint(c)
			if err != nil {
				return fmt.Errorf("ext_authz grpc cluster: %w", err)
			}
			return errors.Join(errIf(ep.String() != extauthzGRPCAddr, "extauthz at %s, want %s", ep, extauthzGRPCAddr),
				errIf(!http2(v.clusters[c]), "cluster %s does not speak HTTP/2", c),
				errIf(v.authz.GetTransportApiVersion() != corev3.ApiVersion_V3, "transport_api_version not V3"))
		}, func(v *view) { v.clusters["extauthz"].TypedExtensionProtocolOptions = nil }},
		{"ext_authz_fails_closed", func(v *view) error {
			a := v.authz
			return errors.Join(errIf(a.GetFailureModeAllow(), "failure_mode_allow is true"),
				errIf(a.GetShadowMode(), "shadow_mode is true"),
				errIf(a.GetFilterEnabled() != nil || a.GetFilterEnabledMetadata() != nil, "filter_enabled set: ext_authz may be skipped"),
				errIf(a.GetStatusOnError().GetCode() != typev3.StatusCode_ServiceUnavailable, "status_on_error %v, want 503", a.GetStatusOnError()))
		}, func(v *view) { v.authz.FailureModeAllow = true }},
		{"ext_authz_timeout", func(v *view) error {
			d := v.authz.GetGrpcService().GetTimeout().AsDuration()
			return errIf(d <= extauthzCheckTimeout || d > 10*time.Second, "ext_authz timeout %v, want above %v and at most 10s", d, extauthzCheckTimeout)
		}, func(v *view) { v.authz.GetGrpcService().Timeout = nil }},
		{"ext_authz_no_body", func(v *view) error {
			return errIf(v.authz.GetWithRequestBody() != nil, "with_request_body set")
		}, func(v *view) { v.authz.WithRequestBody = &extauthzv3.BufferSettings{MaxRequestBytes: 1024} }},
	}
}

func routeProperties() []property {
	return []property{
		{"relay_route", checkRelayRoute, func(v *view) { v.route("relay").GetRoute().Timeout = nil }},
		{"relay_route_keeps_ext_authz", func(v *view) error {
			r := v.route("relay")
			return errIf(r == nil || v.authzDisabled(r), "ext_authz disabled on /relay")
		}, func(v *view) { v.authzOff["relay"] = v.authzOff["healthz"] }},
		{"health_routes_without_auth", checkHealthRoutes, func(v *view) { delete(v.authzOff, "readyz") }},
		{"everything_else_404", checkCatchAll, func(v *view) { v.routes = v.routes[:len(v.routes)-1] }},
		{"only_health_bypasses_auth", checkBypass, func(v *view) {
			v.route("healthz").Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
		}},
		{"authorization_not_forwarded", func(v *view) error {
			var errs []error
			for _, r := range v.routes {
				if r.GetRoute() != nil {
					errs = append(errs, errIf(!slices.Contains(r.GetRequestHeadersToRemove(), "authorization"),
						"route %s forwards Authorization", r.GetName()))
				}
			}
			return errors.Join(errs...)
		}, func(v *view) { v.route("relay").RequestHeadersToRemove = nil }},
		{"identity_headers_not_removed_by_route", func(v *view) error {
			// docs/spec.md#envoy: a route's removal runs after ext_authz and would drop its answer.
			var errs []error
			for _, r := range v.routes {
				for _, h := range r.GetRequestHeadersToRemove() {
					errs = append(errs, errIf(contract.IsWireKubeHeader(h), "route %s removes %s after ext_authz", r.GetName(), h))
				}
			}
			return errors.Join(errs...)
		}, func(v *view) {
			v.route("relay").RequestHeadersToRemove = append(v.route("relay").RequestHeadersToRemove, "x-wirekube-peer")
		}},
	}
}

func checkRelayRoute(v *view) error {
	r := v.route("relay")
	if r == nil {
		return errors.New("no route named relay")
	}
	a := r.GetRoute()
	idle := a.GetIdleTimeout().AsDuration()
	upgrade := slices.ContainsFunc(a.GetUpgradeConfigs(), func(u *routev3.RouteAction_UpgradeConfig) bool {
		return u.GetUpgradeType() == "websocket" && (u.GetEnabled() == nil || u.GetEnabled().GetValue())
	})
	return errors.Join(
		errIf(r.GetMatch().GetPath() != contract.DefaultRelayPath, "relay route matches %v, want path %s", r.GetMatch(), contract.DefaultRelayPath),
		errIf(a.GetCluster() != "bridge", "relay route goes to %q, want bridge", a.GetCluster()),
		errIf(a.GetTimeout() == nil || a.GetTimeout().AsDuration() != 0, "relay route timeout %v, want explicit 0s", a.GetTimeout()),
		errIf(idle < 4*agentKeepalive, "relay route idle_timeout %v, want at least %v", idle, 4*agentKeepalive),
		errIf(v.hcm.GetStreamIdleTimeout().AsDuration() < 4*agentKeepalive, "stream_idle_timeout below %v", 4*agentKeepalive),
		errIf(!upgrade, "relay route has no websocket upgrade"))
}

func checkHealthRoutes(v *view) error {
	var errs []error
	for _, p := range []string{"/healthz", "/readyz"} {
		r := v.route(strings.TrimPrefix(p, "/"))
		if r == nil {
			errs = append(errs, fmt.Errorf("no route for %s", p))
			continue
		}
		errs = append(errs, errIf(r.GetMatch().GetPath() != p, "route %s matches %v", r.GetName(), r.GetMatch()),
			errIf(r.GetRoute().GetCluster() != "bridge", "%s not routed to the bridge", p),
			errIf(!v.authzDisabled(r), "%s calls ext_authz", p))
	}
	return errors.Join(errs...)
}

func checkCatchAll(v *view) error {
	last := v.routes[len(v.routes)-1]
	return errors.Join(
		errIf(last.GetMatch().GetPrefix() != "/", "last route matches %v, want prefix /", last.GetMatch()),
		errIf(last.GetDirectResponse().GetStatus() != 404, "last route is not a direct 404"),
		errIf(!v.authzDisabled(last), "the 404 route calls ext_authz"))
}

// checkBypass: the only routes that reach the bridge without ext_authz are
// the exact paths /healthz and /readyz.
func checkBypass(v *view) error {
	var errs []error
	for _, r := range v.routes {
		if r.GetRoute() == nil || !v.authzDisabled(r) {
			continue
		}
		p := r.GetMatch().GetPath()
		errs = append(errs, errIf(p != "/healthz" && p != "/readyz", "route %s reaches %s without ext_authz (match %v)",
			r.GetName(), r.GetRoute().GetCluster(), r.GetMatch()))
	}
	return errors.Join(errs...)
}

func limitProperties() []property {
	return []property{
		{"overload_manager", checkOverload, func(v *view) { v.boot.OverloadManager = nil }},
		{"buffer_limits", func(v *view) error {
			var errs []error
			for _, l := range v.listeners {
				b := l.GetPerConnectionBufferLimitBytes()
				errs = append(errs, errIf(b == nil || b.GetValue() > maxBufferBytes, "listener %s buffer limit %v", l.GetName(), b))
			}
			for _, c := range v.clusters {
				b := c.GetPerConnectionBufferLimitBytes()
				errs = append(errs, errIf(b == nil || b.GetValue() > maxBufferBytes, "cluster %s buffer limit %v", c.GetName(), b))
			}
			return errors.Join(errs...)
		}, func(v *view) { v.clusters["bridge"].PerConnectionBufferLimitBytes = nil }},
		{"bridge_admits_max_sessions", func(v *view) error {
			ep, err := v.endpoint("bridge")
			if err != nil {
				return err
			}
			th := v.clusters["bridge"].GetCircuitBreakers().GetThresholds()
			ok := len(th) > 0 && th[0].GetMaxConnections().GetValue() >= bridgeMaxSessions && th[0].GetMaxRequests().GetValue() >= bridgeMaxSessions
			return errors.Join(errIf(ep.String() != bridgeAddr, "bridge at %s, want %s", ep, bridgeAddr),
				errIf(!ok, "bridge circuit breaker below --max-sessions %d: %v", bridgeMaxSessions, th))
		}, func(v *view) { v.clusters["bridge"].CircuitBreakers = nil }},
		{"metrics_listener_only_stats", checkMetricsListener, func(v *view) {
			vh := v.metrics.GetRouteConfig().GetVirtualHosts()[0]
			vh.Routes[0].Match.PathSpecifier = &routev3.RouteMatch_Prefix{Prefix: "/"}
		}},
	}
}

func checkOverload(v *view) error {
	names := map[string]bool{}
	for _, m := range v.boot.GetOverloadManager().GetResourceMonitors() {
		names[m.GetName()] = true
	}
	acts := 0
	for _, a := range v.boot.GetOverloadManager().GetActions() {
		if a.GetName() == "envoy.overload_actions.stop_accepting_requests" {
			acts++
		}
	}
	return errors.Join(
		errIf(!names["envoy.resource_monitors.global_downstream_max_connections"], "no downstream connection limit"),
		errIf(!names["envoy.resource_monitors.fixed_heap"], "no heap monitor"),
		errIf(acts == 0, "no stop_accepting_requests overload action"))
}

func checkMetricsListener(v *view) error {
	if v.metrics == nil {
		return errors.New("no envoy_metrics listener")
	}
	var errs []error
	for _, vh := range v.metrics.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			if r.GetRoute() != nil {
				errs = append(errs, errIf(r.GetMatch().GetPath() != "/stats/prometheus",
					"metrics listener forwards %v to the admin interface", r.GetMatch()))
			}
		}
	}
	ep, err := v.endpoint("envoy_admin")
	errs = append(errs, err)
	if err == nil {
		errs = append(errs, errIf(!ep.Addr().IsLoopback(), "envoy_admin cluster at %s", ep))
	}
	return errors.Join(errs...)
}
