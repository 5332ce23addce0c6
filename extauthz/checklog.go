package extauthz

import (
	"context"
	"log/slog"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// checkLogs writes the decision log line, message "check", with the fields
// docs/extauthz.md#observability lists. The fields a plain allow (online,
// nothing owed, no detail, no claimed node) shares with every other plain
// allow of its front and cache outcome are formatted once, into a handler
// that carries them (slog.Logger.With); such a call formats only its own
// eight fields. Every other decision formats all of its fields per call.
// Field order is not part of the contract: only names and values are.
type checkLogs struct {
	base  *slog.Logger
	plain [2][2]slog.Handler // [grpc, http][cache miss, cache hit]
}

func newCheckLogs(base *slog.Logger) *checkLogs {
	c := &checkLogs{base: base}
	for f, front := range [...]string{"grpc", "http"} {
		for hit := range 2 {
			c.plain[f][hit] = base.With(
				slog.String("frontend", front),
				slog.String("result", "allow"),
				slog.String("reason", string(contract.ResultAllowed)),
				slog.Int("status", 200),
				slog.String("claimed_node", ""),
				slog.Bool("cache_hit", hit == 1),
				slog.Bool("offline", false),
				slog.Bool("review_owed", false),
				slog.String("detail", ""),
			).Handler()
		}
	}
	return c
}

// checkLogsFor returns the check loggers of a.log, made again when a.log
// was replaced.
func (a *Authorizer) checkLogsFor() *checkLogs {
	if c := a.checkLogs.Load(); c != nil && c.base == a.log {
		return c
	}
	c := newCheckLogs(a.log)
	a.checkLogs.Store(c)
	return c
}

// plainAllow returns the handler carrying the shared fields of d, or nil
// when d is not a plain allow of the gRPC or HTTP front.
func (c *checkLogs) plainAllow(front string, d *Decision) slog.Handler {
	if !d.Allowed() || d.Bounced || d.Offline || d.ReviewOwed || d.Detail != "" || d.ClaimedNode != "" {
		return nil
	}
	hit := 0
	if d.CacheHit {
		hit = 1
	}
	switch front {
	case "grpc":
		return c.plain[0][hit]
	case "http":
		return c.plain[1][hit]
	}
	return nil
}

// logCheck writes the check line of d.
func (a *Authorizer) logCheck(ctx context.Context, req *Request, d *Decision, client string, elapsed time.Duration) {
	c := a.checkLogsFor()
	if h := c.plainAllow(req.Frontend, d); h != nil {
		writeRecord(ctx, h,
			slog.String("identity", d.Identity),
			slog.String("peer", d.Peer),
			slog.String("key", d.KeyFingerprint),
			slog.String("request_id", req.RequestID),
			slog.String("client_address", client),
			slog.String("method", req.Method),
			slog.String("path", logPath(req.Target)),
			slog.Duration("latency", elapsed),
		)
		return
	}
	result, reason := d.result()
	writeRecord(ctx, c.base.Handler(),
		slog.String("frontend", req.Frontend),
		slog.String("result", result),
		slog.String("reason", string(reason)),
		slog.Int("status", d.Status()),
		slog.String("identity", d.Identity),
		slog.String("peer", d.Peer),
		slog.String("key", d.KeyFingerprint),
		slog.String("request_id", req.RequestID),
		slog.String("client_address", client),
		slog.String("claimed_node", d.ClaimedNode),
		slog.String("method", req.Method),
		slog.String("path", logPath(req.Target)),
		slog.Bool("cache_hit", d.CacheHit),
		slog.Bool("offline", d.Offline),
		slog.Bool("review_owed", d.ReviewOwed),
		slog.String("detail", d.Detail),
		slog.Duration("latency", elapsed),
	)
}

// writeRecord hands h one info record "check" of attrs, as slog.Logger.LogAttrs
// would, without the caller's program counter (no handler of this binary
// sets AddSource; runtime.Callers was a tenth of the line's cost).
func writeRecord(ctx context.Context, h slog.Handler, attrs ...slog.Attr) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "check", 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r)
}
