package extauthz

import (
	"net"
	"net/http"
	"strings"

	"github.com/wirekube/relay-ws/internal/clientaddr"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/logging"
)

// HTTPHandler is the plain HTTP external-auth front end (nginx
// auth_request, ingress-nginx auth-url, Caddy forward_auth, Traefik
// ForwardAuth, Envoy http_service). It answers on every path: 200 with the
// identity headers, or the deny status with X-WireKube-Deny-Reason.
type HTTPHandler struct {
	Authorizer *Authorizer
}

// originalTargetHeaders are the conventions for the original request
// target, in the order they are consulted. X-Original-URL is an absolute URL.
var originalTargetHeaders = [...]string{"X-Forwarded-Uri", "X-Original-Uri", "X-Original-Url"}

var originalMethodHeaders = [...]string{"X-Forwarded-Method", "X-Original-Method"}

func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := h.Authorizer.Decide(r.Context(), requestFromHTTP(r))
	writeDecision(w, d)
}

// requestFromHTTP normalizes an auth subrequest. Upgrade and Connection are
// read only where the proxy forwards the client's (forwardsHopByHop); behind
// a proxy that strips them an Upgrade header is checked only when present and
// Connection is ignored. The bridge checks the upgrade in every case.
// The original method and
// target come from the proxy's headers when present, else from the request
// itself (Envoy http_service appends the original path). Conflicting or
// repeated convention headers make the target invalid (fail closed): a
// client could otherwise send its own X-Forwarded-Uri beside the proxy's
// X-Original-URI.
func requestFromHTTP(r *http.Request) Request {
	req := Request{
		Frontend:      "http",
		Authorization: r.Header.Values("Authorization"),
		Origin:        r.Header.Values("Origin"),
		Upgrade:       r.Header.Values("Upgrade"),
		Subprotocols:  r.Header.Values("Sec-WebSocket-Protocol"),
		HasBody:       r.ContentLength > 0 || len(r.TransferEncoding) > 0,
		// The front's id: nginx's $request_id (the shipped snippet sets
		// X-Request-Id), Envoy http_service's x-request-id.
		RequestID: logging.RequestID(r.Header.Values(contract.HeaderRequestID)),
		// Every shipped front writes the address it saw here (nginx sets
		// it to $remote_addr; Caddy, Traefik and ingress-nginx append or
		// set it themselves); RemoteAddr is the front's own connection.
		ForwardedFor: r.Header.Values("X-Forwarded-For"),
		PeerAddress:  r.RemoteAddr,
		Front:        httpFront(r),
	}
	if req.UpgradeKnown = forwardsHopByHop(r.Header); req.UpgradeKnown {
		req.Connection = r.Header.Values("Connection")
	}
	var ok bool
	req.Method, ok = originalMethod(r)
	if !ok {
		req.TargetInvalid = true
	}
	req.Target, ok = originalTarget(r)
	if !ok {
		req.TargetInvalid = true
	}
	return req
}

func originalMethod(r *http.Request) (string, bool) {
	method := ""
	for _, name := range originalMethodHeaders {
		vals := r.Header.Values(name)
		switch {
		case len(vals) == 0:
			continue
		case len(vals) > 1, method != "" && !strings.EqualFold(method, vals[0]):
			return "", false
		}
		method = strings.ToUpper(strings.TrimSpace(vals[0]))
	}
	if method == "" {
		return r.Method, true
	}
	return method, true
}

// originalTarget returns the original path?query; every convention header
// present must name the same target.
func originalTarget(r *http.Request) (string, bool) {
	target := ""
	for _, name := range originalTargetHeaders {
		vals := r.Header.Values(name)
		if len(vals) == 0 {
			continue
		}
		if len(vals) > 1 {
			return "", false
		}
		p, q, ok := splitTarget(strings.TrimSpace(vals[0]))
		if !ok {
			return "", false
		}
		t := joinTarget(p, q)
		if target != "" && t != target {
			return "", false
		}
		target = t
	}
	if target == "" {
		return r.URL.RequestURI(), true
	}
	return target, true
}

func joinTarget(p, q string) string {
	if q == "" {
		return p
	}
	return p + "?" + q
}

// writeDecision writes the HTTP answer. On allow the identity headers are
// response headers the proxy copies upstream (auth_request_set,
// authResponseHeaders, copy_headers, allowed_upstream_headers), and
// x-envoy-auth-headers-to-remove asks Envoy's http_service to drop the
// token from the upstream request.
func writeDecision(w http.ResponseWriter, d Decision) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if d.Allowed() {
		for _, hv := range d.Headers {
			h.Set(hv.Name, hv.Value)
		}
		h.Set("X-Envoy-Auth-Headers-To-Remove", "authorization")
		w.WriteHeader(http.StatusOK)
		return
	}
	h.Set(contract.HeaderDenyReason, string(d.Reason))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if d.Status() == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", "Bearer")
	}
	if ra := retryAfter(d); ra != "" {
		h.Set("Retry-After", ra)
	}
	w.WriteHeader(d.Status())
	_, _ = w.Write([]byte(denyBody(d.Reason)))
}

// httpFront is the connection r came on: its RemoteAddr, or a Unix
// socket's.
func httpFront(r *http.Request) clientaddr.Front {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && la.Network() == "unix" {
		return clientaddr.Front{Local: true}
	}
	return clientaddr.FrontOfString(r.RemoteAddr)
}
