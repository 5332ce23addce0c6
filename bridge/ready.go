package bridge

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// errNotProbed is the readiness answer before any probe has run.
var errNotProbed = errors.New("bridge: relay not probed yet")

// readiness answers whether the relay was reachable recently. A successful
// session dial counts; otherwise a probe dial runs at most once per
// probeInterval whatever the probe rate (concurrent callers share it).
type readiness struct {
	probe         func(ctx context.Context) error
	now           func() time.Time
	fresh         time.Duration // a success younger than this is ready
	probeInterval time.Duration
	// probeTimeout bounds one probe; zero means 1s. It exceeds one relay
	// address attempt, so a probe whose first address hangs still reaches
	// the next one (and the dialer then orders the hanging one last).
	probeTimeout time.Duration

	group singleflight.Group
	mu    sync.Mutex
	ok    time.Time // last successful dial
	tried time.Time // start of the last completed probe
	err   error     // result of the last probe
}

func (r *readiness) markOK() {
	r.mu.Lock()
	r.ok = r.now()
	r.mu.Unlock()
}

// check returns nil when a dial succeeded within fresh, probing when the
// last probe is older than probeInterval.
func (r *readiness) check(ctx context.Context) error {
	if done, err := r.cached(); done {
		return err
	}
	v, _, _ := r.group.Do("probe", func() (any, error) {
		if done, err := r.cached(); done {
			return err, nil
		}
		start := r.now()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cmp.Or(r.probeTimeout, time.Second))
		defer cancel()
		err := r.probe(ctx)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err == nil {
			r.ok = r.now()
		}
		// Stamped only now, so callers arriving during the probe share it
		// through the group rather than reading a result not yet there.
		r.tried, r.err = start, err
		return err, nil
	})
	err, _ := v.(error)
	return err
}

// cached answers without dialing when it can.
func (r *readiness) cached() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	switch {
	case !r.ok.IsZero() && now.Sub(r.ok) < r.fresh:
		return true, nil
	case !r.tried.IsZero() && now.Sub(r.tried) < r.probeInterval:
		if r.err == nil {
			return true, errNotProbed // the success went stale
		}
		return true, r.err
	}
	return false, nil
}
