// Package envoystandin is a STAND-IN FOR ENVOY, for the end-to-end suite
// only: no Envoy binary can be installed on the machines that run it. It does
// what envoy/envoy.yaml makes Envoy do on the relay route, in the same order:
// terminate TLS, drop every client X-WireKube-* header (header_mutation),
// call envoy.service.auth.v3.Authorization/Check over real gRPC with the
// attributes Envoy's ext_authz filter fills (failure_mode_allow false,
// status_on_error 503, a 3 s timeout), apply the OK answer's headers (with
// their append semantics) and headers_to_remove, drop Authorization (the
// route's request_headers_to_remove), relay a deny's status, headers and
// body, and proxy the WebSocket upgrade to the bridge. Before ext_authz it
// applies the route's per-client-address upgrade limit when the config turns
// it on (sourcelimit.go; off in the shipped files). When an `envoy`
// binary is on PATH the suite runs real Envoy instead.
package envoystandin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

// Options configure the stand-in. Every field is required except the ones
// whose comment gives a default.
type Options struct {
	TLS          *tls.Config // serving certificate
	ExtauthzGRPC string      // host:port of wirekube-extauthz --grpc-listen
	// ExtauthzHTTP, when set instead of ExtauthzGRPC, makes this the
	// http_service variant (httpservice.go): host:port of --http-listen.
	ExtauthzHTTP string
	Bridge       string // host:port of wirekube-bridge --listen
	// ExtraBridges are more endpoints of the bridge cluster (round robin,
	// one retry on another endpoint after a connect failure).
	ExtraBridges []string
	RelayPath    string // default /relay
	CheckTimeout time.Duration
	Logger       *slog.Logger
	// AccessLog, when set, gets one JSON line per request with the fields of
	// envoy/envoy.yaml's access log format, computed as Envoy does.
	AccessLog io.Writer
	// IdleTimeout and MaxRequestHeaderBytes default to the relay listener's
	// idle_timeout and max_request_headers_kb in envoy/envoy.yaml (limits.go).
	IdleTimeout           time.Duration
	MaxRequestHeaderBytes int
	// SourceLimit defaults (when zero) to the relay route's per-source
	// upgrade limit in envoy/envoy.yaml (sourcelimit.go): off there, as
	// Envoy skips the filter for a request it is not enabled for.
	SourceLimit envoyconfig.SourceLimit
}

// Server is the stand-in. It is safe for concurrent use.
type Server struct {
	opts   Options
	conn   *grpc.ClientConn
	authz  authv3.AuthorizationClient
	proxy  *httputil.ReverseProxy
	logger *slog.Logger
	access *accessLog // nil: no access log
	// sources is the relay route's per-client-address upgrade limit.
	sources *sourceLimiter
	// httpAuth is set in the http_service variant (conn and authz are nil).
	httpAuth *httpServiceClient
}

// New connects (lazily) to extauthz and prepares the proxy.
func New(o Options) (*Server, error) {
	if o.TLS == nil || (o.ExtauthzGRPC == "") == (o.ExtauthzHTTP == "") || o.Bridge == "" || o.Logger == nil {
		return nil, errors.New("envoystandin: TLS, one of ExtauthzGRPC and ExtauthzHTTP, Bridge and Logger are required")
	}
	if o.RelayPath == "" {
		o.RelayPath = contract.DefaultRelayPath
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = 3 * time.Second
	}
	if o.IdleTimeout == 0 || o.MaxRequestHeaderBytes == 0 {
		lim, err := relayLimits()
		if err != nil {
			return nil, fmt.Errorf("envoystandin: limits: %w", err)
		}
		if o.IdleTimeout == 0 {
			o.IdleTimeout = lim.IdleTimeout
		}
		if o.MaxRequestHeaderBytes == 0 {
			o.MaxRequestHeaderBytes = lim.MaxRequestHeaderBytes
		}
	}
	if o.SourceLimit == (envoyconfig.SourceLimit{}) {
		lim, err := relaySourceLimit()
		if err != nil {
			return nil, fmt.Errorf("envoystandin: source limit: %w", err)
		}
		o.SourceLimit = lim
	}
	if l := o.SourceLimit; l.Enabled && (l.PerFill == 0 || l.FillInterval <= 0 || l.Buckets == 0) {
		return nil, fmt.Errorf("envoystandin: source limit %+v: want tokens, an interval and buckets", l)
	}
	// The host is a name only: bridgeCluster dials the endpoints.
	target := &url.URL{Scheme: "http", Host: "bridge"}
	s := &Server{opts: o, logger: o.Logger, sources: newSourceLimiter(o.SourceLimit)}
	if o.AccessLog != nil {
		var err error
		if s.access, err = newAccessLog(o.AccessLog); err != nil {
			return nil, fmt.Errorf("envoystandin: access log: %w", err)
		}
	}
	if o.ExtauthzGRPC == "" {
		s.httpAuth = newHTTPServiceClient(o.ExtauthzHTTP)
	} else {
		conn, err := grpc.NewClient(o.ExtauthzGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("envoystandin: grpc: %w", err)
		}
		s.conn, s.authz = conn, authv3.NewAuthorizationClient(conn)
	}
	cluster := newBridgeCluster(append([]string{o.Bridge}, o.ExtraBridges...))
	s.proxy = &httputil.ReverseProxy{
		Transport: cluster.transport(),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host // Envoy keeps the authority
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.logger.Warn("upstream error", "path", r.URL.Path, "err", err)
			bridgeUnavailable(w)
		},
		FlushInterval: -1,
	}
	return s, nil
}

// Serve serves TLS on ln until ctx is done. Upgraded connections are not
// tracked by http.Server: they end when the bridge or the client closes.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	tlsConf := s.opts.TLS.Clone()
	tlsConf.NextProtos = []string{"http/1.1"} // as envoy.yaml's alpn_protocols
	srv := &http.Server{Handler: s, TLSConfig: tlsConf, ReadHeaderTimeout: 10 * time.Second}
	serverLimits(srv, s.opts.IdleTimeout, s.opts.MaxRequestHeaderBytes)
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }() // owned: received below
	select {
	case err := <-errc:
		s.closeConn()
		return fmt.Errorf("envoystandin: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutCtx)
	<-errc
	s.closeConn()
	return err
}

// ServeHTTP routes as envoy.yaml does: the relay path through ext_authz,
// /healthz and /readyz straight to the bridge, anything else 404. Like Envoy
// for a request from outside, it replaces any client x-request-id, and it
// writes the access log line when the request (or the upgraded connection)
// is done.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := &exchange{start: time.Now(), req: r, rec: &recorder{ResponseWriter: w}}
	if s.access != nil {
		defer s.access.write(x)
	}
	if hasUnderscoreHeader(r.Header) {
		x.route, x.details = "", "http1.unexpected_underscore"
		http.Error(x.rec, "Bad Request", http.StatusBadRequest)
		return
	}
	if headerBytes(r) > s.opts.MaxRequestHeaderBytes {
		x.route, x.details = "", "http1.headers_too_large"
		tooLarge(x.rec)
		return
	}
	stripConnectionNominated(r.Header)
	stripClientIdentity(r.Header)
	appendForwardedFor(r)
	r.Header.Set("X-Request-Id", newRequestID())
	switch r.URL.Path {
	case s.opts.RelayPath:
		x.route = "relay"
		// The route's local rate limit runs before ext_authz, when enabled.
		if ok, retry := s.allowSource(r); !ok {
			x.details = "local_rate_limited"
			sourceRateLimited(x.rec, retry)
			return
		}
		s.relay(x)
	case "/healthz", "/readyz":
		x.route, x.details = strings.TrimPrefix(r.URL.Path, "/"), "via_upstream"
		r.Header.Del("Authorization")
		s.proxy.ServeHTTP(x.rec, r)
	default:
		x.route, x.details = "not_found", "direct_response"
		http.NotFound(x.rec, r)
	}
}

func (s *Server) relay(x *exchange) {
	if s.httpAuth != nil {
		s.relayHTTPService(x)
		return
	}
	w, r := x.rec, x.req
	id := r.Header.Get("X-Request-Id")
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.CheckTimeout)
	resp, err := s.authz.Check(ctx, checkRequest(r, id))
	cancel()
	if err != nil {
		// failure_mode_allow: false, status_on_error: 503.
		s.logger.Warn("ext_authz error", "request_id", id, "err", err)
		x.details = "ext_authz_error"
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if codes.Code(resp.GetStatus().GetCode()) != codes.OK {
		x.details = "ext_authz_denied"
		s.deny(w, id, resp.GetDeniedResponse())
		return
	}
	x.details = "via_upstream"
	ok := resp.GetOkResponse()
	for _, o := range ok.GetHeaders() {
		applyHeaderOption(r.Header, o)
	}
	for _, name := range ok.GetHeadersToRemove() {
		r.Header.Del(name)
	}
	r.Header.Del("Authorization") // the route's request_headers_to_remove
	s.logger.Info("ext_authz ok", "request_id", id, "peer", r.Header.Get(contract.HeaderPeer))
	if len(ok.GetResponseHeadersToAdd()) > 0 {
		extra := ok.GetResponseHeadersToAdd()
		p := *s.proxy
		p.ModifyResponse = func(resp *http.Response) error {
			for _, o := range extra {
				applyHeaderOption(resp.Header, o)
			}
			return nil
		}
		p.ServeHTTP(w, r)
		return
	}
	s.proxy.ServeHTTP(w, r)
}

// deny relays a denied answer: its HTTP status (403 when unset, as Envoy),
// its headers and its body.
func (s *Server) deny(w http.ResponseWriter, id string, d *authv3.DeniedHttpResponse) {
	status := int(d.GetStatus().GetCode())
	if status == 0 {
		status = http.StatusForbidden
	}
	for _, o := range d.GetHeaders() {
		applyHeaderOption(w.Header(), overwrite(o))
	}
	s.logger.Info("ext_authz denied", "request_id", id, "status", status,
		"reason", w.Header().Get(contract.HeaderDenyReason))
	w.WriteHeader(status)
	w.Write([]byte(d.GetBody()))
}

// overwrite: Envoy sets a deny's headers on a fresh local reply, so append
// and overwrite are the same; this only avoids a duplicate Content-Type.
func overwrite(o *corev3.HeaderValueOption) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: o.GetHeader(), AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD}
}
