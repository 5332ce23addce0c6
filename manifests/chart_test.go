package manifests

import (
	"flag"
	"github.com/wirekube/relay-ws/internal/test/render"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/internal/test/netpol"
	"github.com/wirekube/relay-ws/internal/version"
	"github.com/wirekube/relay-ws/tools/probe"
)

var chartDir = filepath.Join("..", render.ChartPath)

// renderChart renders the chart into wirekube-system with extra helm args.
func renderChart(t *testing.T, extra ...string) *rendered {
	t.Helper()
	out, err := render.HelmTemplate(t.Context(), chartDir, namespace, extra...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatalf("decode chart: %v", err)
	}
	return &rendered{dir: "chart " + strings.Join(extra, " "), objs: objs}
}

// signingSecretSet names the identity signing Secret a front=none render
// needs without a cluster: the one components/without-envoy mounts.
const signingSecretSet = "identitySigning.existingSecret=wirekube-relay-gateway-identity-signing"

// chartValueSets are the shapes the chart is linted, rendered and dry-run in.
// Every value that changes the Pod's shape (front, Envoy config, policy
// stage, replicas, limits, revocation) has a set here.
var chartValueSets = map[string][]string{
	"default":             nil,
	"front-none":          {"--set", "front=none," + signingSecretSet},
	"front-none-enforce":  {"--set", "front=none,networkPolicy.mode=enforce," + signingSecretSet},
	"enforce":             {"--set", "networkPolicy.mode=enforce"},
	"monitoring":          {"--set", "monitoring.podMonitor.enabled=true,monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.grafanaDashboard.enabled=true"},
	"plaintext":           {"--set", "envoy.config=envoy-plaintext.yaml"},
	"plaintext-enforce":   {"--set", "envoy.config=envoy-plaintext.yaml,networkPolicy.mode=enforce"},
	"single-replica":      {"--set", "replicas=1"},
	"large":               {"--set", "bridge.maxSessions=40000,envoy.resources.limits.memory=1Gi,bridge.resources.limits.memory=768Mi,extauthz.resources.limits.memory=640Mi,replicas=3"},
	"revocation-off":      {"--set", "bridge.revocationAddr="},
	"peer-events-off":     {"--set", "extauthz.peerEvents=false"},
	"mesh-watch-off":      {"--set", "extauthz.meshWatch=false"},
	"admission-never":     {"--set", "peerAdmission.install=never"},
	"pod-options":         podOptionValues,
	"ingress-nginx":       {"--set", "publicHost=relay.corp.internal,front=none,ingress.enabled=true,ingress.controller=ingress-nginx," + signingSecretSet},
	"ingress-alb":         {"--set", "publicHost=relay.corp.internal,ingress.enabled=true,ingress.controller=alb,ingress.alb.certificateArn=arn:aws:acm:eu-west-1:111122223333:certificate/x"},
	"http-route":          {"--set", "publicHost=relay.corp.internal,envoy.config=envoy-plaintext.yaml,httpRoute.enabled=true,httpRoute.parentRefs[0].name=gw,certificate.enabled=true,certificate.issuerRef.name=le"},
	"helm-test":           {"--set", "helmTest.peer=node-a,helmTest.publicKey=" + testPublicKey},
	"helm-test-plaintext": {"--set", "envoy.config=envoy-plaintext.yaml,helmTest.peer=node-a,helmTest.publicKey=" + testPublicKey + ",helmTest.url=ws://wirekube-relay-gateway.wirekube-system.svc/relay"},
}

func TestChartLint(t *testing.T) {
	for name, extra := range chartValueSets {
		t.Run(name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chartDir, "--namespace", namespace, "--kube-version", render.HelmKubeVersion}, extra...)
			if out, err := render.Helm(t.Context(), args...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestChartRejectsBadValues: values the chart must refuse to render.
func TestChartRejectsBadValues(t *testing.T) {
	for name, extra := range map[string][]string{
		"unknown front":                       {"--set", "front=nginx"},
		"no replicas":                         {"--set", "replicas=0"},
		"removed mode migrate":                {"--set", "networkPolicy.mode=migrate"},
		"removed migrationNodeCIDRs":          {"--set", "networkPolicy.mode=enforce,networkPolicy.migrationNodeCIDRs={10.0.0.0/24}"},
		"removed networkPolicy.enabled":       {"--set", "networkPolicy.enabled=true"},
		"envoy memory below its heap":         {"--set", "bridge.maxSessions=40000"},
		"unknown Envoy config":                {"--set", "envoy.config=envoy-custom.yaml"},
		"helm test without a public key":      {"--set", "helmTest.peer=node-a"},
		"unknown peerAdmission.install":       {"--set", "peerAdmission.install=yes"},
		"relayAddr port over 65535":           {"--set", "bridge.relayAddr=wirekube-relay-control:70000"},
		"memory request over its limit":       {"--set", "bridge.resources.requests.memory=1Gi"},
		"drainRate too slow for drainTimeout": {"--set", "bridge.drainRate=500"},
		"Ingress without a controller":        {"--set", "ingress.enabled=true"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := render.HelmTemplate(t.Context(), chartDir, namespace, extra...); err == nil {
				t.Fatal("rendered, want a failure")
			}
		})
	}
}

// helmOnlyLabels are the labels the chart adds to object metadata (Helm's
// conventions) that manifests/base does not carry; they are not selectors.
var helmOnlyLabels = []string{"app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
	"app.kubernetes.io/version", "helm.sh/chart"}

// kustomizeHash is the suffix configMapGenerator appends to a name.
var kustomizeHash = regexp.MustCompile(`^(wirekube-relay-gateway-envoy)-[a-z0-9]{10}$`)

// normalize removes what legitimately differs between the chart and
// kustomize: Helm's labels, the chart's config checksum annotation (the
// chart's way to roll Pods on a config change) and kustomize's name hash
// (kustomize's way), in the ConfigMap and in the Pod's reference to it.
func normalize(t *testing.T, objs []*unstructured.Unstructured) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, o := range objs {
		o = o.DeepCopy()
		labels := o.GetLabels()
		for _, k := range helmOnlyLabels {
			delete(labels, k)
		}
		o.SetLabels(labels)
		// The chart's Pods carry their release (app.kubernetes.io/instance);
		// it is no selector.
		unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "labels", "app.kubernetes.io/instance")
		unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations", "checksum/envoy-config")
		if m := kustomizeHash.FindStringSubmatch(o.GetName()); m != nil && o.GetKind() == "ConfigMap" {
			o.SetName(m[1])
		}
		if vols, ok, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes"); ok {
			for _, v := range vols {
				if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
					if m := kustomizeHash.FindStringSubmatch(cm["name"].(string)); m != nil {
						cm["name"] = m[1]
					}
				}
			}
			_ = unstructured.SetNestedSlice(o.Object, vols, "spec", "template", "spec", "volumes")
		}
		key := o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
		if _, dup := out[key]; dup {
			t.Errorf("two objects %s", key)
		}
		out[key] = o.Object
	}
	return out
}

// sameObjects compares two renderings object by object.
func sameObjects(t *testing.T, chart, kust []*unstructured.Unstructured) {
	t.Helper()
	a, b := normalize(t, chart), normalize(t, kust)
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		ca, cb := a[k], b[k]
		switch {
		case ca == nil:
			t.Errorf("%s: only in the kustomize rendering", k)
		case cb == nil:
			t.Errorf("%s: only in the chart", k)
		case !reflect.DeepEqual(ca, cb):
			ya, _ := yaml.Marshal(ca)
			yb, _ := yaml.Marshal(cb)
			t.Errorf("%s differs.\nchart:\n%s\nkustomize:\n%s", k, ya, yb)
		}
	}
}

// TestChartMatchesBase: with default values the chart renders the objects
// of manifests/base, plus the WireKubePeer admission policy of
// components/peer-admission (examples/peer-admission is both).
func TestChartMatchesBase(t *testing.T) {
	sameObjects(t, renderChart(t).objs, renderDir(t, "examples/peer-admission").objs)
	if t.Failed() {
		t.Log("manifests/base and charts/wirekube-relay-ws must stay equal: a change to one (a flag, a port, a " +
			"label) goes into the other's templates or values.yaml defaults in the same commit")
	}
}

// TestChartFrontNoneMatchesComponent: front=none renders the base with
// components/without-envoy (examples/ingress-nginx without its Ingress).
func TestChartFrontNoneMatchesComponent(t *testing.T) {
	var kust []*unstructured.Unstructured
	for _, o := range renderDir(t, "examples/ingress-nginx").objs {
		if o.GetKind() != "Ingress" {
			kust = append(kust, o)
		}
	}
	// Both mount the identity signing Secret the operator created: a private
	// key is never part of a kustomization, nor of a render without a cluster.
	sameObjects(t, withoutPeerAdmission(renderChart(t, chartValueSets["front-none"]...).objs), kust)
}

// TestChartMonitoringMatchesExample: the chart's PodMonitor and
// PrometheusRule are those of examples/prometheus.
func TestChartMonitoringMatchesExample(t *testing.T) {
	chart := renderChart(t, chartValueSets["monitoring"]...)
	sameObjects(t, append(chart.all("PodMonitor"), chart.all("PrometheusRule")...), renderDir(t, "examples/prometheus").objs)
	chart.one(t, "ServiceMonitor", "wirekube-relay-gateway")
}

// TestChartNetworkPolicyFlows: the chart's policies hold the flow table.
func TestChartNetworkPolicyFlows(t *testing.T) {
	for name, s := range map[string]netpol.Shape{
		"default":            {RelayOpen: true},
		"enforce":            {},
		"front-none":         {WithoutEnvoy: true, RelayOpen: true},
		"front-none-enforce": {WithoutEnvoy: true},
	} {
		t.Run(name, func(t *testing.T) { checkFlows(t, renderChart(t, chartValueSets[name]...), s) })
	}
}

// TestChartEnvoyFilesNoDrift: the chart's files/ are byte-for-byte copies
// of envoy/ (helm cannot read outside the chart).
func TestChartEnvoyFilesNoDrift(t *testing.T) {
	for copyName, src := range map[string]string{"envoy.yaml": "../envoy/envoy.yaml",
		"envoy-plaintext.yaml": "../envoy/envoy-plaintext.yaml", "sds-tls.yaml": "../envoy/sds/tls.yaml"} {
		want, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir, "files", copyName))
		mustf(t, err == nil && string(got) == string(want), "%s/files/%s differs from %s: run make manifests-sync", render.ChartPath, copyName, src)
	}
}

// renderNotes renders NOTES.txt (helm template never prints it) by copying
// the chart to a temporary directory with the notes as an ordinary template.
func renderNotes(t *testing.T, extra ...string) string {
	t.Helper()
	return renderNotesIn(t, namespace, extra...)
}

// renderNotesIn is renderNotes for a release in ns.
func renderNotesIn(t *testing.T, ns string, extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "chart")
	if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// helm parses every template as YAML: wrap the notes in a string field.
	wrapped := "{{- define \"test.notes\" -}}\n" + string(notes) + "\n{{- end -}}\nnotes: {{ include \"test.notes\" . | toJson }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "notes-as-template.yaml"), []byte(wrapped), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := render.HelmTemplate(t.Context(), dir, ns, append(extra, "--show-only", "templates/notes-as-template.yaml")...)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Notes string }
	if err := yaml.Unmarshal(out, &doc); err != nil || doc.Notes == "" {
		t.Fatalf("rendered notes: %v\n%s", err, out)
	}
	return doc.Notes
}

// TestChartNotes: NOTES.txt prints a WireKubeMesh that the CRD fixture
// accepts, pointing at the public host, and probe commands whose flags
// exist.
func TestChartNotes(t *testing.T) {
	for name, extra := range chartValueSets {
		t.Run(name, func(t *testing.T) {
			notes := renderNotes(t, append(extra, "--set", "publicHost=relay.corp.internal")...)
			i := strings.Index(notes, "apiVersion: wirekube.io/")
			if i < 0 {
				t.Fatalf("no WireKubeMesh snippet in NOTES:\n%s", notes)
			}
			var mesh unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(dedentBlock(notes[i-3:])), &mesh.Object); err != nil {
				t.Fatalf("WireKubeMesh snippet: %v", err)
			}
			mustf(t, mesh.GetKind() == "WireKubeMesh", "snippet kind %q", mesh.GetKind())
			mustf(t, str(mesh.Object, "spec", "relay", "managed", "controlEndpoint") == "wss://relay.corp.internal/relay" &&
				str(mesh.Object, "spec", "relay", "managed", "transport") == "wss", "snippet %v", mesh.Object)
			mustf(t, str(mesh.Object, "spec", "meshCIDR") != "", "snippet without spec.meshCIDR (required)")
			checkProbeCommands(t, notes)
		})
	}
}

// dedentBlock returns the indented block at the start of s, dedented.
func dedentBlock(s string) string {
	lines := strings.Split(s, "\n")
	indent := len(lines[0]) - len(strings.TrimLeft(lines[0], " "))
	var out []string
	for _, l := range lines {
		if strings.TrimSpace(l) == "" || len(l)-len(strings.TrimLeft(l, " ")) < indent {
			break
		}
		out = append(out, l[indent:])
	}
	return strings.Join(out, "\n")
}

// checkProbeCommands: every wirekube-relay-probe command in the notes names
// only flags the probe defines.
func checkProbeCommands(t *testing.T, notes string) {
	t.Helper()
	o := probe.DefaultOptions()
	fs := flag.NewFlagSet("wirekube-relay-probe", flag.ContinueOnError)
	o.AddFlags(fs)
	sessionsFlags := sessionsFlagNames(t)
	// A command continues on the next line after a trailing backslash.
	cmds := regexp.MustCompile(`wirekube-relay-probe (?:[^\n\\]|\\\n)*`).FindAllString(notes, -1)
	probes := 0
	for _, c := range cmds {
		flags := regexp.MustCompile(`\s--?([a-z-]+)`).FindAllStringSubmatch(c, -1)
		if strings.HasPrefix(c, "wirekube-relay-probe sessions ") {
			for _, f := range flags {
				mustf(t, sessionsFlags[f[1]], "sessions command uses -%s, which wirekube-relay-probe sessions does not define", f[1])
			}
			continue
		}
		probes++
		mustf(t, strings.Contains(c, "--url wss://relay.corp.internal/relay"), "probe command without the relay URL: %q", c)
		for _, f := range flags {
			mustf(t, fs.Lookup(f[1]) != nil, "probe command uses --%s, which the probe does not define", f[1])
		}
	}
	mustf(t, probes >= 2, "want the node and the token probe commands, got %q", cmds)
}

// sessionsFlagNames are the flags wirekube-relay-probe sessions -h lists.
func sessionsFlagNames(t *testing.T) map[string]bool {
	t.Helper()
	var help strings.Builder
	if err := probe.Command(t.Context(), []string{"sessions", "-h"}, io.Discard, &help); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z-]+)`).FindAllStringSubmatch(help.String(), -1) {
		names[m[1]] = true
	}
	mustf(t, names["namespace"] && names["n"], "no flags parsed from sessions -h:\n%s", help.String())
	return names
}

// TestAlertRunbooks: every alert links its row in docs/monitoring.md, keeps
// the namespace label (no absent(), which drops every label it was not
// given as an equality) and finds targets by Pod name, not by a job name
// that only the chart's monitors would give.
func TestAlertRunbooks(t *testing.T) {
	var spec struct {
		Groups []struct {
			Rules []struct {
				Alert, Expr string
				Annotations map[string]string
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(chartDir, "files", "prometheusrule-spec.yaml"))
	if err == nil {
		err = yaml.Unmarshal(data, &spec)
	}
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/monitoring.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			anchor := strings.ToLower(r.Alert)
			// Pinned to the tag of the version this tree builds, whose docs
			// describe the installed alerts (main moves on); main while the
			// tree is a -dev version, which no tag names.
			want := "https://github.com/wirekube/relay-ws/blob/" + docsRef(version.Release) + "/docs/monitoring.md#" + anchor
			mustf(t, r.Annotations["runbook_url"] == want, "%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
			mustf(t, strings.Contains(string(doc), `<a id="`+anchor+`"></a>`), "docs/monitoring.md has no anchor %s for %s", anchor, r.Alert)
			mustf(t, !strings.Contains(r.Expr, "absent("), "%s uses absent(), which drops the namespace label: %s", r.Alert, r.Expr)
			mustf(t, !strings.Contains(r.Expr, "job="), "%s matches a job name (set by the scrape config): %s", r.Alert, r.Expr)
		}
	}
	mustf(t, n > 0, "no alerts")
}
