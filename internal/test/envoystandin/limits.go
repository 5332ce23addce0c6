package envoystandin

import (
	"net/http"
	"time"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

// relayLimits reads the relay listener's downstream limits from the shipped
// envoy/envoy.yaml (envoyconfig.ListenerLimits: Envoy's defaults of 1 h idle and
// 60 KiB of headers where the config sets none).
func relayLimits() (envoyconfig.DownstreamLimits, error) {
	b, err := envoyconfig.LoadShipped(envoyconfig.TLSConfig)
	if err != nil {
		return envoyconfig.DownstreamLimits{}, err
	}
	return envoyconfig.ListenerLimits(b, "relay_tls")
}

// headerBytes is the size Envoy holds against max_request_headers_kb: every
// header's name and value, the pseudo headers (:method, :path, :authority)
// included.
func headerBytes(r *http.Request) int {
	n := len(":method") + len(r.Method) + len(":path") + len(r.URL.RequestURI()) + len(":authority") + len(r.Host)
	for name, vs := range r.Header {
		for _, v := range vs {
			n += len(name) + len(v)
		}
	}
	return n
}

// tooLarge is Envoy's local reply for headers over max_request_headers_kb:
// 431 before any filter runs (so extauthz never sees the request).
func tooLarge(w http.ResponseWriter) {
	http.Error(w, "Request Header Fields Too Large", http.StatusRequestHeaderFieldsTooLarge)
}

// serverLimits applies the limits to srv: IdleTimeout closes a keep-alive
// connection with no request in flight (common_http_protocol_options
// idle_timeout: "the period in which there are no active requests or
// streams ... the connection will be closed", envoyproxy.io FAQ "How do I
// configure timeouts?"); an upgraded connection is hijacked, so net/http's
// idle timer no longer touches it, as Envoy's idle timer does not fire while
// a stream is active. MaxHeaderBytes only bounds what net/http reads;
// ServeHTTP enforces the exact limit.
func serverLimits(srv *http.Server, idle time.Duration, maxHeader int) {
	srv.IdleTimeout = idle
	if idle == 0 { // idle_timeout 0s disables it in Envoy; net/http would fall back to ReadTimeout
		srv.IdleTimeout = -1
	}
	srv.MaxHeaderBytes = maxHeader + 4096
}
