package extauthz

import (
	"context"
	"fmt"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/wirekube/relay-ws/extauthz/internal/admission"
	"github.com/wirekube/relay-ws/extauthz/internal/events"
	"github.com/wirekube/relay-ws/extauthz/internal/meshwatch"
	"github.com/wirekube/relay-ws/extauthz/internal/roomwatch"
	"github.com/wirekube/relay-ws/extauthz/internal/signkeys"
)

// service is what Run builds before it listens: the rooms of extauthz and
// the Authorizer they serve.
type service struct {
	in      *Informers
	rec     *events.Recorder // nil: --peer-events off
	policy  *admission.Watch // reports only
	meshes  *meshwatch.Watch // nil: --mesh-watch off
	rooms   *roomwatch.Watch // nil: --bridge-room-url empty
	authz   *Authorizer
	hub     *revocationhub.Hub
	keyring *signkeys.Keyring
}

// newService builds every room, each with its dependencies passed in: the
// signing key and the live bindings before the Authorizer, the Authorizer
// before the hub.
func newService(cfg *Config, c Clients, reg prometheus.Registerer, log *slog.Logger) (*service, error) {
	s := &service{}
	var err error
	if s.in, err = NewInformers(cfg, c.Core, c.Peers); err != nil {
		return nil, err
	}
	if s.rec, err = eventRecorder(cfg, c, s.in, reg, log); err != nil {
		return nil, err
	}
	if s.policy, err = admission.New(c.Admission, cfg.peerAdmission.Policy, cfg.peerAdmission.Binding, reg, log); err != nil {
		return nil, err
	}
	if s.meshes, err = meshWatch(cfg, c, s.rec, reg, log); err != nil {
		return nil, err
	}
	if s.keyring, err = signkeys.Load(cfg.signing); err == nil {
		err = signkeys.Publish(s.keyring, cfg.signing) // before any answer is signed with it
	}
	if err != nil {
		return nil, err
	}
	log.Info("identity signing key loaded", "signing_key_id", s.keyring.Signer().KeyID(),
		"published_key_ids", s.keyring.Fingerprints(), "keys_file", cfg.signing.IdentityKeysFile)
	live := revocationhub.NewLiveBindings()
	deps := Deps{Reviews: c.Reviews, Objects: s.in, Registry: reg, Logger: log,
		Keys: c.Keys, Events: s.rec, Live: live, Signer: s.keyring.Signer()}
	if cfg.bridgeRoomURL != "" {
		if s.rooms, err = roomwatch.New(cfg.bridgeRoomURL, reg, log, nil); err != nil {
			return nil, err
		}
		deps.Rooms = s.rooms
	}
	if s.authz, err = NewAuthorizer(cfg, deps); err != nil {
		return nil, err
	}
	if s.hub, err = revocationhub.New(revocationhub.Deps{Judge: s.authz, Events: s.authz.events, Limits: cfg.revocation,
		Live: live, Reg: reg, Log: log}); err != nil {
		return nil, fmt.Errorf("revocation metrics: %w", err)
	}
	if err := s.in.OnChange(live.Notify); err != nil {
		return nil, err
	}
	return s, nil
}

// runBackground starts, on g, every loop that serves no listener: the
// informers' consumers, the keys, the follow-up reviews, the watches, the
// Events and the signing key reload.
func (s *service) runBackground(ctx context.Context, g *errgroup.Group, cfg *Config, log *slog.Logger) {
	g.Go(func() error { return s.authz.RunKeys(ctx) })
	g.Go(func() error { return s.authz.RunReviewAfter(ctx) })
	g.Go(func() error { s.policy.Run(ctx); return nil }) // reports only: never gates readiness
	if s.meshes != nil {
		g.Go(func() error { s.meshes.Run(ctx); return nil }) // reports only, as above
	}
	if s.rooms != nil {
		g.Go(func() error { s.rooms.Run(ctx); return nil }) // steers while fresh, never gates readiness
	}
	g.Go(func() error { return s.authz.runSigning(ctx, cfg.signing, s.keyring, log) })
	if s.rec != nil {
		g.Go(func() error { s.rec.Run(ctx); return nil })
	}
	g.Go(func() error {
		<-ctx.Done()
		s.hub.Shutdown() // before the graceful gRPC stop, which waits for streams
		return nil
	})
}

// becomeReady turns health SERVING and the hub synced once the informers
// synced and the verification keys loaded; it returns early when ctx is
// done (shutting down).
func (s *service) becomeReady(ctx context.Context, hs *health.Server, log *slog.Logger) error {
	if err := s.in.WaitForSync(ctx); err != nil {
		return nil // ctx done before sync: shutting down
	}
	if !waitUntil(ctx, s.authz.KeysLoaded) {
		return nil
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(authServiceName, healthpb.HealthCheckResponse_SERVING)
	s.hub.MarkSynced()
	log.Info("informer caches synced, signing keys loaded: serving")
	return nil
}
