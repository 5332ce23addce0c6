package manifests

import (
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/render"
)

// TestChartExpectedRelayURL: extauthz's --expected-relay-url follows
// extauthz.expectedRelayURL, else publicHost, except the example.com
// placeholder (the default, as manifests/base: no flag).
func TestChartExpectedRelayURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  []string
		want string // "": the flag not rendered
	}{
		{"default placeholder", nil, ""},
		{"placeholder apex", []string{"--set", "publicHost=example.com"}, ""},
		{"public host", []string{"--set", "publicHost=relay.corp.test"}, "wss://relay.corp.test/relay"},
		{"explicit URL wins", []string{"--set", "publicHost=relay.corp.test,extauthz.expectedRelayURL=wss://edge.corp.test:8443/wk"},
			"wss://edge.corp.test:8443/wk"},
		{"watch off", []string{"--set", "publicHost=relay.corp.test,extauthz.meshWatch=false"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := container(renderChart(t, tc.set...).deployment(t), "extauthz").Args
			v, set := flagValue(args, "expected-relay-url")
			mustf(t, set == (tc.want != "") && v == tc.want, "--expected-relay-url=%q (set %v), want %q", v, set, tc.want)
		})
	}
}

// TestChartMeshWatchOff: extauthz.meshWatch=false turns the watch off and
// drops the wirekubemeshes rule (the default renders both:
// TestChartMatchesBase).
func TestChartMeshWatchOff(t *testing.T) {
	r := renderChart(t, chartValueSets["mesh-watch-off"]...)
	v, set := flagValue(container(r.deployment(t), "extauthz").Args, "mesh-watch")
	mustf(t, set && v == "false", "extauthz --mesh-watch=%q set=%v, want false", v, set)
	checkRBAC(t, r, r.deployment(t))
}

// TestChartRejectsExpectedRelayURL: only a wss:// URL is accepted.
func TestChartRejectsExpectedRelayURL(t *testing.T) {
	for _, v := range []string{"ws://relay.corp.test/relay", "relay.corp.test", "wss://relay.corp.test/relay?x=1"} {
		t.Run(v, func(t *testing.T) {
			if _, err := render.HelmTemplate(t.Context(), chartDir, namespace, "--set", "extauthz.expectedRelayURL="+v); err == nil {
				t.Fatal("rendered, want a failure")
			}
		})
	}
}

// TestChartNotesMeshWatch: NOTES.txt says which URL extauthz expects, or
// that only ws:// is judged while publicHost is the placeholder.
func TestChartNotesMeshWatch(t *testing.T) {
	notes := renderNotes(t, "--set", "publicHost=relay.corp.test")
	mustf(t, strings.Contains(notes, "anywhere but wss://relay.corp.test/relay, or over ws://"), "NOTES:\n%s", notes)
	notes = renderNotes(t)
	mustf(t, strings.Contains(notes, "only ws:// is reported: publicHost is the example.com placeholder"), "NOTES:\n%s", notes)
	notes = renderNotes(t, chartValueSets["mesh-watch-off"]...)
	mustf(t, !strings.Contains(notes, "WireKubeMesh watch"), "NOTES with meshWatch=false:\n%s", notes)
}
