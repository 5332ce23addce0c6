package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// revoker ends live sessions whose authorization ended (docs/revocation.md).
// It closes a session when its token expires (locally, from
// X-WireKube-Token-Expires) and, when --revocation-addr is set, follows
// extauthz's Watch stream: on every (re)connect it sends the binding of
// every live session, then each new and ended one; extauthz answers with
// the sessions to close. While the stream is not in sync, sessions it can
// no longer vouch for are closed after --revocation-stale-timeout. The
// bridge itself holds no Kubernetes credentials. Safe for concurrent use.
type revoker struct {
	addr       string
	secretFile string
	stale      time.Duration
	unready    time.Duration // out of sync this long: not ready, no upgrades
	grace      time.Duration
	log        *slog.Logger
	m          *revocationMetrics
	now        func() time.Time

	mu          sync.Mutex
	seq         uint64
	live        map[uint64]*session
	streaming   bool            // a stream is open: ops are queued for it
	pending     []revocation.Op // ops for the open stream, in order
	gen         uint64          // generation of the open stream's list
	inSync      bool            // extauthz acknowledged the list of gen
	synced      bool            // inSync was true once
	lastFailure string          // the last error logged by logFailure
	downSince   time.Time       // when the stream last stopped being in sync
	wake        chan struct{}
}

func newRevoker(cfg *Config, log *slog.Logger, m *revocationMetrics) *revoker {
	return &revoker{
		addr: cfg.RevocationAddr, secretFile: cfg.RevocationSecretFile, stale: cfg.RevocationStaleTimeout,
		unready: cfg.RevocationUnreadyAfter, grace: cfg.TokenExpiryGrace,
		log: log, m: m, now: time.Now, live: map[uint64]*session{}, downSince: time.Now(),
		wake: make(chan struct{}, 1),
	}
}

func (r *revoker) enabled() bool { return r.addr != "" }

func (r *revoker) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// add starts watching sess: its token expiry timer and, with a stream, its
// binding. It runs before the session serves.
func (r *revoker) add(sess *session) {
	exp := sess.id.TokenExpires.Add(r.grace)
	sess.expiry = time.AfterFunc(max(exp.Sub(r.now()), 0), func() {
		sess.fromTimer(func() {
			if sess.end(closeWith(websocket.ClosePolicyViolation, contract.CloseTokenExpired, nil)) {
				r.m.authCloses.WithLabelValues(causeTokenExpired).Inc()
			}
		})
	})
	if !r.enabled() {
		return
	}
	r.mu.Lock()
	r.seq++
	sess.revID = r.seq
	r.live[sess.revID] = sess
	if r.streaming {
		r.pending = append(r.pending, revocation.Op{Kind: revocation.KindAdd, ID: sess.revID, Binding: sess.id.Binding})
	}
	r.mu.Unlock()
	r.signal()
}

// remove stops watching sess once it has ended.
func (r *revoker) remove(sess *session) {
	sess.expiry.Stop()
	if !r.enabled() {
		return
	}
	r.mu.Lock()
	delete(r.live, sess.revID)
	if r.streaming {
		r.pending = append(r.pending, revocation.Op{Kind: revocation.KindRemove, ID: sess.revID})
	}
	r.mu.Unlock()
	r.signal()
}

// run follows the stream until ctx is done, reconnecting with a capped,
// jittered backoff, and closes stale sessions while it is out of sync.
// It returns after every goroutine it started.
func (r *revoker) run(ctx context.Context) error {
	if !r.enabled() {
		return nil
	}
	conn, err := grpc.NewClient(r.addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(revocation.SecretCredentials{Path: r.secretFile}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(revocation.MaxMessage)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 15 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 2 * time.Second,
			Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second}}),
	)
	if err != nil {
		return err
	}
	defer conn.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.sweepStale(ctx)
	}()
	defer wg.Wait()
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := r.now()
		err := r.follow(ctx, conn)
		r.endStream(err)
		if r.now().Sub(start) > 10*time.Second {
			wait = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait/2 + rand.N(wait/2+1)):
		}
		wait = min(2*wait, 2*time.Second)
	}
	return nil
}

// follow runs one stream: the full list, then adds, removes and the
// revocations extauthz sends, until the stream fails or ctx is done.
func (r *revoker) follow(ctx context.Context, conn *grpc.ClientConn) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := conn.NewStream(sctx, &revocation.StreamDesc, revocation.WatchMethod)
	if err != nil {
		return err
	}
	gen, list := r.beginStream()
	if err := revocation.Send(cs, list); err != nil {
		return err
	}
	var recvErr error
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		recvErr = r.receive(cs, gen)
	}()
	err = r.sendPending(sctx, cs, recvDone)
	cancel() // ends the receiver's RecvMsg
	<-recvDone
	if err == nil {
		err = recvErr
	}
	return err
}

// beginStream snapshots every live session as the stream's list, followed
// by the Synced marker of a new generation; later adds and removes queue
// behind it.
func (r *revoker) beginStream() (uint64, []revocation.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streaming, r.pending = true, nil
	r.gen++
	list := make([]revocation.Op, 0, len(r.live)+1)
	for id, sess := range r.live {
		list = append(list, revocation.Op{Kind: revocation.KindAdd, ID: id, Binding: sess.id.Binding})
	}
	return r.gen, append(list, revocation.Op{Kind: revocation.KindSynced, ID: r.gen})
}

// sendPending sends queued adds and removes until ctx is done or the
// receiver stopped (it returns nil then: the receiver has the error).
func (r *revoker) sendPending(ctx context.Context, cs grpc.ClientStream, recvDone <-chan struct{}) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-recvDone:
			return nil
		case <-r.wake:
		}
		r.mu.Lock()
		ops := r.pending
		r.pending = nil
		r.mu.Unlock()
		if err := revocation.Send(cs, ops); err != nil {
			return err
		}
	}
}

// receive applies what extauthz sends until the stream ends.
func (r *revoker) receive(cs grpc.ClientStream, gen uint64) error {
	for {
		ops, err := revocation.RecvFromExtauthz(cs)
		if err != nil {
			return err
		}
		for _, op := range ops {
			switch {
			case op.Kind == revocation.KindRevoke:
				r.revoke(op)
			case op.Kind == revocation.KindSyncedAck && op.ID == gen:
				r.markSynced()
			}
		}
	}
}

func (r *revoker) markSynced() {
	r.mu.Lock()
	n := len(r.live)
	r.inSync, r.synced = true, true
	r.mu.Unlock()
	r.m.connected.Set(1)
	r.m.resyncs.Inc()
	r.log.Info("revocation stream in sync", slog.Int("sessions", n))
}

// endStream records that the stream is gone: live sessions age from now
// towards the stale timeout.
func (r *revoker) endStream(err error) {
	r.mu.Lock()
	wasInSync := r.inSync
	r.streaming, r.pending, r.inSync = false, nil, false
	if wasInSync {
		r.downSince = r.now()
	}
	r.mu.Unlock()
	r.m.connected.Set(0)
	if wasInSync {
		r.log.Warn("revocation stream lost", slog.String("error", errString(err)),
			slog.Duration("stale_timeout", r.stale))
		return
	}
	r.logFailure(err)
}

func errString(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return ""
	}
	return err.Error()
}

// revoke closes the session extauthz revoked, if it is still live.
func (r *revoker) revoke(op revocation.Op) {
	r.mu.Lock()
	sess := r.live[op.ID]
	r.mu.Unlock()
	if sess == nil {
		return // ended meanwhile
	}
	if sess.end(revokedClose(contract.Reason(op.Reason))) {
		r.m.authCloses.WithLabelValues(causeRevoked).Inc()
	}
	if op.EventUnixNano > 0 {
		r.m.lag.Observe(max(r.now().Sub(time.Unix(0, op.EventUnixNano)), 0).Seconds())
	}
}

// sweepStale closes, while the stream is out of sync, every session that
// has gone --revocation-stale-timeout without the stream vouching for it:
// since the stream was lost, or since its admission if that came later.
func (r *revoker) sweepStale(ctx context.Context) {
	tick := time.NewTicker(min(max(r.stale/10, 50*time.Millisecond), time.Second))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		stale := r.staleAt(r.now())
		for _, sess := range stale {
			if sess.end(closeWith(websocket.ClosePolicyViolation, contract.CloseRevocationStale, nil)) {
				r.m.authCloses.WithLabelValues(causeRevocationStale).Inc()
			}
		}
		if len(stale) > 0 {
			r.log.Warn("revocation stream out of sync: closed the sessions it can no longer vouch for",
				slog.Int("sessions", len(stale)), slog.Duration("stale_timeout", r.stale))
		}
	}
}

// staleAt returns, while the stream is out of sync, the live sessions the
// stream has not vouched for in the --revocation-stale-timeout before now:
// not since it was lost, or since their admission if that came later.
func (r *revoker) staleAt(now time.Time) []*session {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inSync {
		return nil
	}
	var stale []*session
	cutoff := now.Add(-r.stale)
	for _, sess := range r.live {
		if vouched := laterOf(sess.start, r.downSince); vouched.Before(cutoff) {
			stale = append(stale, sess)
		}
	}
	return stale
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// revokedClose is the 1008 close of a session extauthz revoked: with the
// reason extauthz gave when it is one this bridge knows, else
// authorization_revoked. One closeWith per reason, so that docs/spec.md's
// test sees each.
func revokedClose(r contract.Reason) *closeError {
	switch r {
	case contract.ReasonPodNotFound:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodNotFound, nil)
	case contract.ReasonPodUIDMismatch:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodUIDMismatch, nil)
	case contract.ReasonPodServiceAccountMismatch:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodServiceAccountMismatch, nil)
	case contract.ReasonPodNotScheduled:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodNotScheduled, nil)
	case contract.ReasonPodTerminated:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPodTerminated, nil)
	case contract.ReasonNodeMismatch:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonNodeMismatch, nil)
	case contract.ReasonServiceAccountNotFound:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonServiceAccountNotFound, nil)
	case contract.ReasonIdentityNotAllowed:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonIdentityNotAllowed, nil)
	case contract.ReasonTokenNotBound:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonTokenNotBound, nil)
	case contract.ReasonPeerNotFound:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPeerNotFound, nil)
	case contract.ReasonPeerKeyInvalid:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPeerKeyInvalid, nil)
	case contract.ClosePeerKeyChanged:
		return closeWith(websocket.ClosePolicyViolation, contract.ClosePeerKeyChanged, nil)
	case contract.ReasonPeerKeyDuplicate:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPeerKeyDuplicate, nil)
	case contract.ReasonPeerKeyMoved:
		return closeWith(websocket.ClosePolicyViolation, contract.ReasonPeerKeyMoved, nil)
	case contract.CloseRevocationLimit:
		return closeWith(websocket.ClosePolicyViolation, contract.CloseRevocationLimit, nil)
	}
	return closeWith(websocket.ClosePolicyViolation, contract.CloseRevoked, fmt.Errorf("extauthz reason %q", r))
}
