package envoystandin

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

// TestSourceLimitFromShippedConfig: by default the stand-in takes the
// per-address limit of envoy.yaml: off, sized a burst of 20000, 200 a
// second, 25000 addresses for when it is on.
func TestSourceLimitFromShippedConfig(t *testing.T) {
	s, _ := newAllowingServer(t, &peerBridge{}, Options{})
	want := envoyconfig.SourceLimit{Enabled: false, Burst: 20000, PerFill: 200, FillInterval: time.Second, Buckets: 25000}
	if s.opts.SourceLimit != want {
		t.Errorf("source limit %+v, want %+v", s.opts.SourceLimit, want)
	}
}

// TestSourceLimitOffCountsNothing: with the limit off (a bucket of 1 that
// would refuse the second upgrade if it were counted) every upgrade from
// one address reaches ext_authz.
func TestSourceLimitOffCountsNothing(t *testing.T) {
	s, authz := newAllowingServer(t, &peerBridge{}, Options{
		SourceLimit: envoyconfig.SourceLimit{Enabled: false, Burst: 1, PerFill: 1, FillInterval: time.Hour, Buckets: 1},
	})
	for i := range 5 {
		if w := serveFrom(s, "192.0.2.1", "/relay"); w.Code != http.StatusOK {
			t.Fatalf("upgrade %d: status %d, want 200", i, w.Code)
		}
	}
	if got := authz.calls.Load(); got != 5 {
		t.Errorf("%d checks, want 5", got)
	}
}

// TestRelayUpgradesLimitedPerSource: with a bucket of 2 refilled at 1 per
// 10 s, an address's third upgrade gets 429 source_rate_limited with
// Retry-After 10 and extauthz is not asked; probes from it and upgrades from
// another address pass; 10 s later it passes again.
func TestRelayUpgradesLimitedPerSource(t *testing.T) {
	s, authz := newAllowingServer(t, &peerBridge{}, Options{
		SourceLimit: envoyconfig.SourceLimit{Enabled: true, Burst: 2, PerFill: 1, FillInterval: 10 * time.Second, Buckets: 100},
	})
	clock := time.Unix(1_700_000_000, 0)
	s.sources.now = func() time.Time { return clock }
	steps := []struct {
		name, addr, path string
		advance          time.Duration
		want             int
		wantChecks       int64
	}{
		{"first", "192.0.2.1", "/relay", 0, http.StatusOK, 1},
		{"second", "192.0.2.1", "/relay", 0, http.StatusOK, 2},
		{"third is over the burst", "192.0.2.1", "/relay", 0, http.StatusTooManyRequests, 2},
		{"probe from the same address", "192.0.2.1", "/healthz", 0, http.StatusOK, 2},
		{"another address", "192.0.2.2", "/relay", 0, http.StatusOK, 3},
		{"refilled after 10s", "192.0.2.1", "/relay", 10 * time.Second, http.StatusOK, 4},
	}
	for _, st := range steps {
		clock = clock.Add(st.advance)
		w := serveFrom(s, st.addr, st.path)
		if w.Code != st.want || authz.calls.Load() != st.wantChecks {
			t.Fatalf("%s: status %d after %d checks, want %d after %d", st.name, w.Code, authz.calls.Load(), st.want, st.wantChecks)
		}
		if w.Code != http.StatusTooManyRequests {
			continue
		}
		h := w.Header()
		if h.Get(contract.HeaderDenyReason) != string(contract.ReasonSourceRateLimited) ||
			h.Get("Retry-After") != "10" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: headers %v, want source_rate_limited, Retry-After 10, Cache-Control no-store", st.name, h)
		}
	}
}

// TestSourceBucketsForgotten: with room for one address's bucket
// (max_dynamic_descriptors 1), an exhausted address starts full again once
// another address took its place.
func TestSourceBucketsForgotten(t *testing.T) {
	s, _ := newAllowingServer(t, &peerBridge{}, Options{
		SourceLimit: envoyconfig.SourceLimit{Enabled: true, Burst: 1, PerFill: 1, FillInterval: time.Hour, Buckets: 1},
	})
	for i, st := range []struct {
		addr string
		want int
	}{
		{"192.0.2.1", http.StatusOK},
		{"192.0.2.1", http.StatusTooManyRequests},
		{"192.0.2.2", http.StatusOK},
		{"192.0.2.1", http.StatusOK},
	} {
		if w := serveFrom(s, st.addr, "/relay"); w.Code != st.want {
			t.Errorf("request %d from %s: status %d, want %d", i, st.addr, w.Code, st.want)
		}
	}
}

func serveFrom(s *Server, addr, path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, "https://relay.example.com"+path, nil)
	r.RemoteAddr = addr + ":40000"
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}
