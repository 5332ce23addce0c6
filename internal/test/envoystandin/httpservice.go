package envoystandin

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/wirekube/relay-ws/internal/contract"
)

// The http_service variant: what Envoy's ext_authz filter does with the
// `http_service` configuration of docs/proxy-snippets.md ("Envoy http_service"),
// with the same route rules as the gRPC variant (identity headers stripped
// before the check, Authorization removed after it):
//
//   - the auth request has the original method, the original path and query
//     (no path_prefix), the original Host, Content-Length 0 and only the
//     client headers that snippet's allowed_headers names (authorization,
//     origin, upgrade, connection, content-length, transfer-encoding,
//     x-forwarded-for: the client address, after Envoy appended its peer);
//   - a 200 answer: the headers named by allowed_upstream_headers overwrite
//     the request's, and x-envoy-auth-headers-to-remove removes the headers it
//     lists;
//   - any other answer is a deny: its status, the headers named by
//     allowed_client_headers and its body go to the client; a failed call is
//     403 (Envoy's status_on_error default for http_service).
//
// Whether real Envoy passes the hop-by-hop upgrade and connection headers
// through allowed_headers is not shown here (no Envoy binary): this variant
// passes them, as the snippet asks.
var (
	httpServiceAllowedHeaders   = []string{"Authorization", "Origin", "Upgrade", "Connection", "Content-Length", "Transfer-Encoding", "X-Forwarded-For"}
	httpServiceUpstreamHeaders  = contract.IdentityHeaders
	httpServiceClientHeaders    = []string{contract.HeaderDenyReason, "WWW-Authenticate", "Retry-After", "Cache-Control"}
	httpServiceHeadersToRemove  = "X-Envoy-Auth-Headers-To-Remove"
	httpServiceStatusOnError    = http.StatusForbidden
	httpServiceMaxDenyBodyBytes = int64(64 << 10)
)

type httpServiceClient struct {
	base   string
	client *http.Client
}

func newHTTPServiceClient(addr string) *httpServiceClient {
	return &httpServiceClient{base: "http://" + addr, client: &http.Client{
		// Never follow a redirect: Envoy passes it to the client as a deny.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (s *Server) closeConn() {
	if s.conn != nil {
		s.conn.Close()
	}
}

func (s *Server) relayHTTPService(x *exchange) {
	w, r := x.rec, x.req
	id := r.Header.Get("X-Request-Id")
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.CheckTimeout)
	defer cancel()
	resp, err := s.httpAuth.check(ctx, r, id)
	if err != nil {
		s.logger.Warn("ext_authz http_service error", "request_id", id, "err", err)
		x.details = "ext_authz_error"
		w.WriteHeader(httpServiceStatusOnError)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		x.details = "ext_authz_denied"
		for _, name := range httpServiceClientHeaders {
			if vs := resp.Header.Values(name); len(vs) > 0 {
				w.Header()[http.CanonicalHeaderKey(name)] = vs
			}
		}
		s.logger.Info("ext_authz http_service denied", "request_id", id, "status", resp.StatusCode,
			"reason", resp.Header.Get(contract.HeaderDenyReason))
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, io.LimitReader(resp.Body, httpServiceMaxDenyBodyBytes))
		return
	}
	for _, name := range httpServiceUpstreamHeaders {
		if v := resp.Header.Get(name); v != "" {
			r.Header.Set(name, v)
		}
	}
	for _, name := range strings.Split(resp.Header.Get(httpServiceHeadersToRemove), ",") {
		if name = strings.TrimSpace(name); name != "" {
			r.Header.Del(name)
		}
	}
	r.Header.Del("Authorization") // the route's request_headers_to_remove
	x.details = "via_upstream"
	s.logger.Info("ext_authz http_service ok", "request_id", id, "peer", r.Header.Get(contract.HeaderPeer))
	s.proxy.ServeHTTP(w, r)
}

func (c *httpServiceClient) check(ctx context.Context, r *http.Request, id string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, c.base+r.URL.RequestURI(), http.NoBody)
	if err != nil {
		return nil, err
	}
	req.Host = r.Host
	for _, name := range httpServiceAllowedHeaders {
		if vs := r.Header.Values(name); len(vs) > 0 {
			req.Header[http.CanonicalHeaderKey(name)] = append([]string(nil), vs...)
		}
	}
	// Envoy sends no body (no with_request_body): the client's framing
	// headers are not this request's (net/http writes Content-Length itself).
	req.Header.Del("Transfer-Encoding")
	req.Header.Del("Content-Length")
	req.Header.Set("X-Request-Id", id)
	req.Header.Set("X-Forwarded-Proto", "https")
	return c.client.Do(req)
}
