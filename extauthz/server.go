package extauthz

import (
	"context"
	"errors"
	"fmt"
	"github.com/wirekube/relay-ws/extauthz/internal/jwks"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	authnv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/util/watchlist"

	"github.com/wirekube/relay-ws/extauthz/internal/admission"
	"github.com/wirekube/relay-ws/extauthz/internal/events"
	"github.com/wirekube/relay-ws/extauthz/internal/kubewatch"
	"github.com/wirekube/relay-ws/extauthz/internal/meshwatch"
	"github.com/wirekube/relay-ws/internal/netutil"
)

// shutdownTimeout bounds the graceful stop of each server.
const shutdownTimeout = 10 * time.Second

// authServiceName is the gRPC service name health reports for.
const authServiceName = "envoy.service.auth.v3.Authorization"

// Clients are the narrow Kubernetes clients the service uses. All are
// required.
type Clients struct {
	// Core lists and watches Pods, ServiceAccounts and Nodes
	// (kubernetes.Interface.CoreV1() fits).
	Core CoreClient
	// Reviews creates TokenReviews (kubernetes.Interface.AuthenticationV1()).
	// Give it no client-side rate limiter (the binary does not): the review
	// gate applies --kube-api-qps itself, before a review slot is taken.
	Reviews authnv1client.TokenReviewsGetter
	// Peers lists and watches WireKubePeers (dynamic.Interface.Resource(PeerGVR)).
	Peers dynamic.ResourceInterface
	// Keys fetches the ServiceAccount issuer discovery documents
	// (jwks.RESTFetch of the API server's REST client).
	Keys jwks.FetchFunc
	// Events writes the Events of --peer-events (kubernetes.Interface.CoreV1());
	// nil records none.
	Events events.Client
	// Admission reads the WireKubePeer admission policy and its binding
	// (kubernetes.Interface.AdmissionregistrationV1()); nil: not watched.
	Admission admission.Client
	// Meshes lists and watches WireKubeMeshes for --mesh-watch
	// (dynamic.Interface.Resource(MeshGVR)); nil: not watched.
	Meshes dynamic.ResourceInterface
}

// NewClients derives the narrow Clients from a clientset and a dynamic
// client.
func NewClients(kube kubernetes.Interface, dyn dynamic.Interface) Clients {
	c := Clients{Core: kube.CoreV1(), Reviews: kube.AuthenticationV1(), Peers: dyn.Resource(PeerGVR), Events: kube.CoreV1(),
		Meshes: dyn.Resource(MeshGVR)}
	if rc := kube.Discovery().RESTClient(); rc != nil { // nil for a fake clientset
		c.Keys = jwks.RESTFetch(rc)
	}
	c.Admission = kube.AdmissionregistrationV1()
	if watchlist.DoesClientNotSupportWatchListSemantics(kube) {
		c.Core = coreNoWatchList{c.Core}
		c.Admission = admission.NoWatchList{Client: c.Admission}
	}
	if watchlist.DoesClientNotSupportWatchListSemantics(dyn) {
		c.Peers = kubewatch.NoWatchList{ResourceInterface: c.Peers}
		c.Meshes = kubewatch.NoWatchList{ResourceInterface: c.Meshes}
	}
	return c
}

// Run serves cfg until ctx is done, then stops every server (bounded) and
// waits for every goroutine it started. gRPC health and /readyz report
// serving only once the informer caches have synced.
func Run(ctx context.Context, cfg *Config, c Clients, reg *prometheus.Registry, log *slog.Logger) error {
	if cfg == nil || c.Core == nil || c.Reviews == nil || c.Peers == nil || c.Keys == nil {
		return errors.New("extauthz: Run needs a completed Config and every client")
	}
	s, err := newService(cfg, c, reg, log)
	if err != nil {
		return err
	}
	lns, err := listenAll(cfg)
	if err != nil {
		return err
	}
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(authServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	gs := grpc.NewServer(append(revocationhub.Keepalive(), grpc.MaxRecvMsgSize(1<<20))...)
	authv3.RegisterAuthorizationServer(gs, &CheckServer{Authorizer: s.authz})
	healthpb.RegisterHealthServer(gs, hs)

	g, gctx := errgroup.WithContext(ctx)
	s.in.Start(gctx)
	defer s.in.Shutdown()
	s.runBackground(gctx, g, cfg, log)
	g.Go(func() error { return s.becomeReady(gctx, hs, log) })
	g.Go(func() error { return serveGRPC(gctx, gs, hs, lns.grpc) })
	if lns.revocation != nil {
		rs := revocationhub.NewServer(s.hub, lns.secret)
		g.Go(func() error {
			return revocationhub.Serve(gctx, rs, lns.revocation, cfg.revocation.RevocationSecretFile, log)
		})
	}
	if lns.http != nil {
		g.Go(func() error { return serveHTTP(gctx, newHTTPServer(&HTTPHandler{Authorizer: s.authz}), lns.http) })
	}
	ready := func() bool { return s.in.HasSynced() && s.authz.KeysLoaded() }
	g.Go(func() error { return serveHTTP(gctx, newHTTPServer(opsMux(reg, ready)), lns.metrics) })
	log.Info("listening", "grpc", lns.grpc.Addr().String(), "http", addrOf(lns.http), "metrics", lns.metrics.Addr().String(),
		"revocation", addrOf(lns.revocation))
	return g.Wait()
}

// eventRecorder is the Event recorder of --peer-events, nil when off. Its
// source.host is the Pod name (the hostname).
func eventRecorder(cfg *Config, c Clients, in *Informers, reg prometheus.Registerer, log *slog.Logger) (*events.Recorder, error) {
	if !cfg.peerEvents || c.Events == nil {
		return nil, nil
	}
	host, _ := os.Hostname()
	return events.New(c.Events, in, reg, log, host, nil)
}

type listeners struct {
	grpc, http, metrics, revocation net.Listener
	secret                          string // of the revocation listener
}

func listenAll(cfg *Config) (*listeners, error) {
	var l listeners
	var err error
	closeAll := func() {
		for _, ln := range []net.Listener{l.grpc, l.http, l.metrics, l.revocation} {
			if ln != nil {
				_ = ln.Close()
			}
		}
	}
	if l.grpc, err = netutil.Listen(cfg.grpcListen); err != nil {
		return nil, fmt.Errorf("--grpc-listen: %w", err)
	}
	if cfg.httpListen != "" {
		if l.http, err = netutil.Listen(cfg.httpListen); err != nil {
			closeAll()
			return nil, fmt.Errorf("--http-listen: %w", err)
		}
	}
	if l.metrics, err = netutil.Listen(cfg.metricsListen); err != nil {
		closeAll()
		return nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	if cfg.revocation.RevocationListen != "" {
		if l.revocation, l.secret, err = revocationhub.Listen(cfg.revocation); err != nil {
			closeAll()
			return nil, err
		}
	}
	return &l, nil
}

func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}

// serveGRPC serves until ctx is done, then reports NOT_SERVING and stops
// gracefully, forcing the stop after shutdownTimeout.
func serveGRPC(ctx context.Context, gs *grpc.Server, hs *health.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- gs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("grpc serve: %w", err)
	case <-ctx.Done():
	}
	hs.Shutdown()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(shutdownTimeout):
		gs.Stop()
		<-stopped
	}
	<-errc
	return nil
}

func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// serveHTTP serves until ctx is done, then shuts down within shutdownTimeout.
func serveHTTP(ctx context.Context, srv *http.Server, ln net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("http serve %s: %w", ln.Addr(), serr)
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("http shutdown %s: %w", ln.Addr(), err)
	}
	return nil
}

// opsMux serves /healthz (liveness), /readyz (caches synced and signing
// keys loaded) and /metrics.
func opsMux(reg *prometheus.Registry, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "informer caches not synced or signing keys not loaded", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// waitUntil polls cond every 100 ms until it holds (true) or ctx is done.
func waitUntil(ctx context.Context, cond func() bool) bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// MeshGVR is the WireKubeMesh resource (cluster-scoped).
var MeshGVR = meshwatch.GVR

// meshWatch is the watch of --mesh-watch, nil when off or without a
// client; its Events go through rec (nil: none).
func meshWatch(cfg *Config, c Clients, rec *events.Recorder, reg prometheus.Registerer, log *slog.Logger) (*meshwatch.Watch, error) {
	if !cfg.meshWatch.Enabled || c.Meshes == nil {
		return nil, nil
	}
	return meshwatch.New(c.Meshes, cfg.meshWatch.Expected, rec, reg, log, nil)
}
