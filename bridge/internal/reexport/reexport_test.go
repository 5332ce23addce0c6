package reexport

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestReexportMetricsRefusesNonLoopbackURLs: only plain http to a loopback
// host with a port is accepted, and the error names the flag.
func TestReexportMetricsRefusesNonLoopbackURLs(t *testing.T) {
	for raw, valid := range map[string]bool{
		"http://127.0.0.1:9103/metrics":          true,
		"http://localhost:9902/stats/prometheus": true,
		"http://[::1]:9103/metrics":              true,
		"http://10.0.0.1:9103/metrics":           false,
		"https://127.0.0.1:9103/metrics":         false,
		"http://127.0.0.1/metrics":               false,
		"http://example.com:9103/metrics":        false,
	} {
		err := (&Options{ReexportMetrics: []string{raw}}).Validate()
		if (err == nil) != valid || err != nil && !strings.Contains(err.Error(), "--reexport-metrics") {
			t.Errorf("%s: Validate() = %v, want valid %v", raw, err, valid)
		}
	}
}

// FuzzParseReexport: any bytes another container answers either fail to
// parse or give named families, sorted, each name once.
func FuzzParseReexport(f *testing.F) {
	f.Add([]byte(testutil.ExtauthzExposition))
	f.Add([]byte("# TYPE envoy_cluster_upstream_cx_connect_fail counter\nenvoy_cluster_upstream_cx_connect_fail{envoy_cluster_name=\"bridge\"} 0\n"))
	f.Add([]byte("x{a=\"\\\"\"} NaN 1\n# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_sum 2\nh_count 1\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		fams, err := parseReexport(body)
		if err != nil {
			return
		}
		for i, fam := range fams {
			if fam.GetName() == "" {
				t.Fatalf("family %d has no name", i)
			}
			if i > 0 && fams[i-1].GetName() >= fam.GetName() {
				t.Fatalf("families out of order or repeated: %q then %q", fams[i-1].GetName(), fam.GetName())
			}
		}
	})
}

// TestReexportMetricsLeavesOutAnAnswerOverTheLimit: an answer longer than
// 16 MiB is left out of the scrape and counted as too_large.
func TestReexportMetricsLeavesOutAnAnswerOverTheLimit(t *testing.T) {
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		line := []byte("wirekube_extauthz_padding 1\n")
		for written := 0; written <= 16<<20; written += len(line) {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}))
	defer huge.Close()
	g, err := New(prometheus.NewRegistry(), []string{huge.URL + "/metrics"}, &http.Client{Timeout: Timeout}, MaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, Path, nil))
	body := w.Body.String()
	if strings.Contains(body, "wirekube_extauthz_padding") {
		t.Errorf("/metrics/pod carries an answer over 16 MiB")
	}
	if want := `wirekube_bridge_metrics_reexport_failures_total{cause="too_large",url="` + huge.URL + `/metrics"} 1`; !strings.Contains(body, want) {
		t.Errorf("/metrics/pod lacks %q", want)
	}
}
