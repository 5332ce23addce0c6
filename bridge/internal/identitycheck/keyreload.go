package identitycheck

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wirekube/relay-ws/internal/identitysig"
)

// keysMinReload bounds how often an unknown key id re-reads an unchanged
// keys file; within it, each unknown key id costs a stat of the file, and
// a re-read only when the stat shows the file changed (a key just
// published is trusted on the first request that names it).
const keysMinReload = time.Second

// keyReloader re-reads the identity keys file every interval while the
// bridge runs, so that a dropped key is forgotten without a request to
// prompt it (FileKeys.Lookup re-reads only for an unknown key id: after
// keysMinReload, or within it when a stat shows the file changed).
type keyReloader struct {
	keys        *identitysig.FileKeys
	every       time.Duration
	log         *slog.Logger
	errors      prometheus.Counter
	lookupReads prometheus.CounterFunc
}

// newKeyReloader returns the reloader of the keys file at path, re-read
// every interval, and registers its metrics.
func newKeyReloader(path string, every time.Duration, log *slog.Logger, reg prometheus.Registerer) (*keyReloader, error) {
	k := &keyReloader{keys: identitysig.NewFileKeys(path, keysMinReload),
		every: every, log: log,
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "wirekube_bridge_identity_keys_reload_errors_total",
			Help: "Re-reads of --identity-keys-file that failed (missing or not parsing); the keys of the last good read stay trusted.",
		})}
	held := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "wirekube_bridge_identity_keys",
		Help: "Identity signing keys the bridge trusts (the last good read of --identity-keys-file).",
	}, func() float64 { return float64(len(k.keys.KeyIDs())) })
	k.lookupReads = prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "wirekube_bridge_identity_keys_lookup_reads_total",
		Help: "Reads of --identity-keys-file prompted by a signature naming a key id the bridge does not hold: at most one a second, plus one per change of the file (seen by a stat).",
	}, func() float64 { return float64(k.keys.LookupReads()) })
	for _, c := range []prometheus.Collector{k.errors, held, k.lookupReads} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("bridge: metrics: %w", err)
		}
	}
	return k, nil
}

// run re-reads the file every interval until ctx is done. Nil does nothing.
func (k *keyReloader) run(ctx context.Context) {
	if k == nil {
		return
	}
	t := time.NewTicker(k.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			k.reload(now)
		}
	}
}

// reload re-reads the file once and logs what changed: the key ids (short
// fingerprints, never the keys) or the error.
func (k *keyReloader) reload(now time.Time) {
	before := k.keys.KeyIDs()
	if err := k.keys.Reload(now); err != nil {
		k.errors.Inc()
		k.log.Error("identity keys file not re-read, keeping the keys of the last good read",
			slog.String("error", err.Error()), slog.Any("key_ids", before))
		return
	}
	if after := k.keys.KeyIDs(); !slices.Equal(before, after) {
		k.log.Info("identity keys reloaded", slog.Any("key_ids", after), slog.Any("previous_key_ids", before))
	}
}
