package bridge

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestReexportMetricsServesOtherContainersFamilies: with --reexport-metrics,
// /metrics/pod carries a family another container serves, keeps the
// bridge's own value of a family both export, and counts a URL that fails
// as left out of the scrape; /metrics stays the bridge's own.
func TestReexportMetricsServesOtherContainersFamilies(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(testutil.ExtauthzExposition))
	}))
	defer ok.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	defer broken.Close()
	h := startBridge(t, func(o *Options) { o.ReexportMetrics = []string{ok.URL + "/metrics", broken.URL + "/metrics"} })
	w := httptest.NewRecorder()
	h.srv.AdminHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics/pod", nil))
	body := w.Body.String()
	for _, want := range []string{
		`wirekube_extauthz_checks_total{reason="token_invalid",result="deny"} 3`,
		"wirekube_bridge_sessions_active 0",
		`wirekube_bridge_metrics_reexport_failures_total{cause="status",url="` + broken.URL + `/metrics"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics/pod lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "wirekube_bridge_sessions_active 99") {
		t.Errorf("/metrics/pod carries another container's value of a bridge family:\n%s", body)
	}
	own := httptest.NewRecorder()
	h.srv.AdminHandler().ServeHTTP(own, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if strings.Contains(own.Body.String(), "wirekube_extauthz_checks_total") {
		t.Errorf("/metrics carries another container's family:\n%s", own.Body.String())
	}
}
