// Package revocationclient is the bridge's end of the revocation stream
// (docs/revocation.md): the Watch stream to the extauthz of its Pod, what
// it vouches for, the stale sweep while it cannot, and the close of every
// session at its token's expiry. It is handed each live session as a
// Session and imports nothing of the bridge; the bridge decides how a
// session closes.
package revocationclient

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// Client ends live sessions whose authorization ended (docs/revocation.md).
// It closes a session when its token expires (locally, from
// X-WireKube-Token-Expires) and, when --revocation-addr is set, follows
// extauthz's Watch stream: on every (re)connect it sends the binding of
// every live session, then each new and ended one; extauthz answers with
// the sessions to close. While the stream is not in sync, sessions it can
// no longer vouch for are closed after --revocation-stale-timeout. The
// bridge itself holds no Kubernetes credentials. Safe for concurrent use.
type Client struct {
	addr       string
	secretFile string
	stale      time.Duration
	unready    time.Duration // out of sync this long: not ready, no upgrades
	grace      time.Duration
	log        *slog.Logger
	m          *metrics
	now        func() time.Time

	mu          sync.Mutex
	seq         uint64
	live        map[uint64]Session
	streaming   bool            // a stream is open: ops are queued for it
	pending     []revocation.Op // ops for the open stream, in order
	gen         uint64          // generation of the open stream's list
	inSync      bool            // extauthz acknowledged the list of gen
	synced      bool            // inSync was true once
	lastFailure string          // the last error logged by logFailure
	downSince   time.Time       // when the stream last stopped being in sync
	wake        chan struct{}
}

// New builds the client of the validated o; its metrics are registered on
// reg. Run follows the stream; with o.RevocationAddr empty only the token
// expiry closes sessions.
func New(o Options, log *slog.Logger, reg prometheus.Registerer) (*Client, error) {
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Client{
		addr: o.RevocationAddr, secretFile: o.RevocationSecretFile, stale: o.RevocationStaleTimeout,
		unready: o.RevocationUnreadyAfter, grace: o.TokenExpiryGrace,
		log: log, m: m, now: time.Now, live: map[uint64]Session{}, downSince: time.Now(),
		wake: make(chan struct{}, 1),
	}, nil
}

// Enabled reports whether the stream is on (--revocation-addr set).
func (r *Client) Enabled() bool { return r.addr != "" }

func (r *Client) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Watched is a session the client watches: Add returns it, Remove takes it.
type Watched struct {
	id     uint64      // the session's name on the stream (0: stream off)
	expiry *time.Timer // closes it when its token expires
}

// Add starts watching sess: its token expiry timer and, with a stream, its
// binding. It runs before the session serves.
func (r *Client) Add(sess Session) Watched {
	var w Watched
	exp := sess.TokenExpires().Add(r.grace)
	w.expiry = time.AfterFunc(max(exp.Sub(r.now()), 0), func() {
		if sess.CloseFor(CauseTokenExpired, "") {
			r.m.authCloses.WithLabelValues(CauseTokenExpired).Inc()
		}
	})
	if !r.Enabled() {
		return w
	}
	r.mu.Lock()
	r.seq++
	w.id = r.seq
	r.live[w.id] = sess
	if r.streaming {
		r.pending = append(r.pending, revocation.Op{Kind: revocation.KindAdd, ID: w.id, Binding: sess.Binding()})
	}
	r.mu.Unlock()
	r.signal()
	return w
}

// Remove stops watching a session once it has ended.
func (r *Client) Remove(w Watched) {
	w.expiry.Stop()
	if !r.Enabled() {
		return
	}
	r.mu.Lock()
	delete(r.live, w.id)
	if r.streaming {
		r.pending = append(r.pending, revocation.Op{Kind: revocation.KindRemove, ID: w.id})
	}
	r.mu.Unlock()
	r.signal()
}

// Run follows the stream until ctx is done, reconnecting with a capped,
// jittered backoff, and closes stale sessions while it is out of sync.
// It returns after every goroutine it started.
func (r *Client) Run(ctx context.Context) error {
	if !r.Enabled() {
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
func (r *Client) follow(ctx context.Context, conn *grpc.ClientConn) error {
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
func (r *Client) beginStream() (uint64, []revocation.Op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streaming, r.pending = true, nil
	r.gen++
	list := make([]revocation.Op, 0, len(r.live)+1)
	for id, sess := range r.live {
		list = append(list, revocation.Op{Kind: revocation.KindAdd, ID: id, Binding: sess.Binding()})
	}
	return r.gen, append(list, revocation.Op{Kind: revocation.KindSynced, ID: r.gen})
}

// sendPending sends queued adds and removes until ctx is done or the
// receiver stopped (it returns nil then: the receiver has the error).
func (r *Client) sendPending(ctx context.Context, cs grpc.ClientStream, recvDone <-chan struct{}) error {
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
func (r *Client) receive(cs grpc.ClientStream, gen uint64) error {
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

func (r *Client) markSynced() {
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
func (r *Client) endStream(err error) {
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

// logFailure logs why a stream that never got in sync failed, once per
// distinct error (a missing socket or secret file would otherwise retry
// silently while /readyz fails).
func (r *Client) logFailure(err error) {
	msg := errString(err)
	r.mu.Lock()
	repeat := msg == r.lastFailure
	r.lastFailure = msg
	r.mu.Unlock()
	if msg != "" && !repeat {
		r.log.Warn("revocation stream not in sync: not ready, upgrades refused (revocation_unavailable)",
			slog.String("error", msg), slog.String("addr", r.addr))
	}
}

// revoke closes the session extauthz revoked, if it is still live.
func (r *Client) revoke(op revocation.Op) {
	r.mu.Lock()
	sess := r.live[op.ID]
	r.mu.Unlock()
	if sess == nil {
		return // ended meanwhile
	}
	if sess.CloseFor(CauseRevoked, contract.Reason(op.Reason)) {
		r.m.authCloses.WithLabelValues(CauseRevoked).Inc()
	}
	if op.EventUnixNano > 0 {
		r.m.lag.Observe(max(r.now().Sub(time.Unix(0, op.EventUnixNano)), 0).Seconds())
	}
}

// sweepStale closes, while the stream is out of sync, every session that
// has gone --revocation-stale-timeout without the stream vouching for it:
// since the stream was lost, or since its admission if that came later.
func (r *Client) sweepStale(ctx context.Context) {
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
			if sess.CloseFor(CauseRevocationStale, "") {
				r.m.authCloses.WithLabelValues(CauseRevocationStale).Inc()
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
func (r *Client) staleAt(now time.Time) []Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inSync {
		return nil
	}
	var stale []Session
	cutoff := now.Add(-r.stale)
	for _, sess := range r.live {
		if vouched := laterOf(sess.Admitted(), r.downSince); vouched.Before(cutoff) {
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
