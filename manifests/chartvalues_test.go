package manifests

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/bridge"
	"github.com/wirekube/relay-ws/extauthz"
	"github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/test/render"
	"github.com/wirekube/relay-ws/internal/version"
	"github.com/wirekube/relay-ws/tools/probe"
)

// renderKustomization renders a kustomization written into a temporary
// directory two levels below manifests/ (kustomize refuses absolute
// paths to bases), so "../../" in it means manifests/.
func renderKustomization(t *testing.T, body string) *rendered {
	t.Helper()
	tmp, err := os.MkdirTemp(".", ".kustomization-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	dir := filepath.Join(tmp, "k")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	body = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" + body
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r := renderDir(t, dir)
	r.dir = "kustomization " + strings.ReplaceAll(body, "\n", " ")
	return r
}

// TestVersionPinned: the chart and manifests/base run the image of the
// version this tree builds (internal/version.Release, which `make build`
// stamps into the binaries).
func TestVersionPinned(t *testing.T) {
	var chart struct{ Version, AppVersion string }
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err == nil {
		err = yaml.Unmarshal(data, &chart)
	}
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, chart.AppVersion == version.Release, "Chart.yaml appVersion %q, the tree builds %q (internal/version.Release)", chart.AppVersion, version.Release)
	mustf(t, "v"+chart.Version == version.Release, "Chart.yaml version %q, want %q without the v", chart.Version, version.Release)
	want := version.Image + ":" + version.Release
	for _, c := range renderDir(t, "base").deployment(t).Spec.Template.Spec.Containers {
		mustf(t, c.Name == "envoy" || c.Image == want, "manifests/base %s image %q, want %q", c.Name, c.Image, want)
	}
	for _, c := range renderChart(t).deployment(t).Spec.Template.Spec.Containers {
		mustf(t, c.Name == "envoy" || c.Image == want, "chart %s image %q, want %q", c.Name, c.Image, want)
	}
	cmd := exec.Command("make", "-s", "-n", "build")
	cmd.Dir = ".."
	out, err := cmd.Output()
	mustf(t, err == nil && strings.Contains(string(out), "internal/version.Version="+version.Release+"\""),
		"make build does not stamp %s (%v):\n%s", version.Release, err, out)
}

// parseBridge parses args with the bridge binary's own flag set and options
// validation (what wirekube-bridge does before it starts).
func parseBridge(t *testing.T, args []string) bridge.Options {
	t.Helper()
	o := bridge.DefaultOptions()
	fs := flag.NewFlagSet("wirekube-bridge", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	version.AddFlag(fs)
	if err := cli.Parse(fs, args); err != nil {
		t.Fatalf("wirekube-bridge %v: %v", args, err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("wirekube-bridge %v: %v", args, err)
	}
	return o
}

func parseExtauthz(t *testing.T, args []string) extauthz.Options {
	t.Helper()
	o := extauthz.DefaultOptions()
	fs := flag.NewFlagSet("wirekube-extauthz", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	version.AddFlag(fs)
	if err := cli.Parse(fs, args); err != nil {
		t.Fatalf("wirekube-extauthz %v: %v", args, err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("wirekube-extauthz %v: %v", args, err)
	}
	return o
}

// TestRenderedArgsParse: the args of every chart shape and of each
// kustomize rendering are accepted by the flag sets and validation of the
// binaries built from this tree; an unknown flag is refused by name.
func TestRenderedArgsParse(t *testing.T) {
	check := func(t *testing.T, r *rendered) {
		d := r.deployment(t)
		if c := container(d, "bridge"); c != nil {
			parseBridge(t, c.Args)
		}
		if c := container(d, "extauthz"); c != nil {
			parseExtauthz(t, c.Args)
		}
	}
	for name, extra := range chartValueSets {
		t.Run("chart/"+name, func(t *testing.T) { check(t, renderChart(t, extra...)) })
	}
	for _, dir := range render.Dirs() {
		r := renderDir(t, dir)
		if len(r.all("Deployment")) == 1 {
			t.Run(dir, func(t *testing.T) { check(t, r) })
		}
	}
	for name, add := range map[string]func(*flag.FlagSet){
		"bridge":   func(fs *flag.FlagSet) { o := bridge.DefaultOptions(); o.AddFlags(fs) },
		"extauthz": func(fs *flag.FlagSet) { o := extauthz.DefaultOptions(); o.AddFlags(fs) },
	} {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		add(fs)
		err := cli.Parse(fs, []string{"--listen-adress=:1"})
		mustf(t, err != nil && strings.Contains(err.Error(), "listen-adress"), "%s: unknown flag gives %v, want an error naming it", name, err)
	}
}

// TestChartSchemaRefuses: values.schema.json makes helm refuse a typo or a
// wrong type at install, naming the value.
func TestChartSchemaRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		extra []string
		names string
	}{
		"typo at the top":          {[]string{"--set", "replica=3"}, "replica"},
		"typo below":               {[]string{"--set", "bridge.maxSesions=30000"}, "maxSesions"},
		"string for integer":       {[]string{"--set", "replicas=two"}, "/replicas"},
		"unknown policy stage":     {[]string{"--set", "networkPolicy.mode=lockdown"}, "/networkPolicy/mode"},
		"bad duration":             {[]string{"--set", "bridge.drainTimeout=30"}, "/bridge/drainTimeout"},
		"bad digest":               {[]string{"--set", "image.digest=latest"}, "/image/digest"},
		"unknown Service type":     {[]string{"--set", "service.type=External"}, "/service/type"},
		"list for a string":        {[]string{"--set", "publicHost={a,b}"}, "/publicHost"},
		"flag without dashes":      {[]string{"--set", "bridge.extraArgs={max-sessions=1}"}, "/bridge/extraArgs"},
		"selector in podLabels":    {[]string{"--set", "podLabels.app\\.kubernetes\\.io/name=x"}, "/podLabels"},
		"PDB maxUnavailable 0":     {[]string{"--set", "podDisruptionBudget.maxUnavailable=0"}, "/podDisruptionBudget/maxUnavailable"},
		"PDB maxUnavailable 0%":    {[]string{"--set", "podDisruptionBudget.maxUnavailable=0%"}, "/podDisruptionBudget/maxUnavailable"},
		"PDB over 100%":            {[]string{"--set", "podDisruptionBudget.maxUnavailable=101%"}, "/podDisruptionBudget/maxUnavailable"},
		"maxSessions unbounded":    {[]string{"--set", "bridge.maxSessions=100000"}, "/bridge/maxSessions"},
		"relayAddr without port":   {[]string{"--set", "bridge.relayAddr=wirekube-relay-control.wirekube-system.svc"}, "/bridge/relayAddr"},
		"memory not a quantity":    {[]string{"--set", "bridge.resources.limits.memory=lots"}, "/bridge/resources/limits/memory"},
		"unreadyAt under 50":       {[]string{"--set", "bridge.unreadyAt=1"}, "/bridge/unreadyAt"},
		"envoy arg without dashes": {[]string{"--set", "envoy.extraArgs={concurrency=2}"}, "/envoy/extraArgs"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := render.HelmTemplate(t.Context(), chartDir, namespace, tc.extra...)
			mustf(t, err != nil && strings.Contains(err.Error(), "schema") && strings.Contains(err.Error(), tc.names),
				"helm template %v: %v, want a schema error naming %s", tc.extra, err, tc.names)
		})
	}
	// A values file with a bare `off` (YAML reads it as false) is the off stage.
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte("networkPolicy:\n  mode: off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustf(t, len(renderChart(t, "-f", f).policies(t)) == 0, "mode: off (unquoted) renders a NetworkPolicy")
}

// TestChartSchemaCoversValues: every value in values.yaml is declared in
// values.schema.json (an undeclared one would be refused as unknown).
func TestChartSchemaCoversValues(t *testing.T) {
	var values map[string]any
	data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err == nil {
		err = yaml.Unmarshal(data, &values)
	}
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	data, err = os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err == nil {
		err = json.Unmarshal(data, &schema)
	}
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	var walk func(path string, v any, s map[string]any)
	walk = func(path string, v any, s map[string]any) {
		m, ok := v.(map[string]any)
		props, declared := s["properties"].(map[string]any)
		if !ok || !declared {
			return // a leaf, or a free-form map (labels, selectors)
		}
		mustf(t, s["additionalProperties"] == false, "schema %s admits unknown keys", path)
		for k, child := range m {
			cs, ok := props[k].(map[string]any)
			if !ok {
				missing = append(missing, path+"."+k)
				continue
			}
			walk(path+"."+k, child, cs)
		}
	}
	walk("", values, schema)
	sort.Strings(missing)
	mustf(t, len(missing) == 0, "values.yaml has values the schema does not declare: %v", missing)
}

// TestChartNotesStage: NOTES say which lock-down stage the release is in
// and what one replica costs.
func TestChartNotesStage(t *testing.T) {
	for name, want := range map[string][]string{
		"default":        {"networkPolicy.mode=off", "agents still on transport tcp keep reaching the raw relay", "sessions -n wirekube-system --every-peer"},
		"enforce":        {"networkPolicy.mode=enforce", "Anything on a relay Pod's node"},
		"single-replica": {"ONE REPLICA", "no PodDisruptionBudget"},
		"helm-test":      {"helm test wirekube-relay-gateway"},
	} {
		t.Run(name, func(t *testing.T) {
			notes := renderNotes(t, chartValueSets[name]...)
			for _, w := range want {
				mustf(t, strings.Contains(notes, w), "NOTES lack %q:\n%s", w, notes)
			}
			mustf(t, !strings.Contains(notes, "/etc/wireguard"), "NOTES name /etc/wireguard: WireKube keeps its key in /var/lib/wirekube")
		})
	}
}

// TestChartHelmTest: the helm test Pod runs the probe in check mode (never
// --register) against the public host, as the agent's ServiceAccount with
// a relay-audience token, with flags the probe defines.
func TestChartHelmTest(t *testing.T) {
	mustf(t, len(renderChart(t).all("Pod")) == 0, "a helm test Pod without helmTest.peer")
	r := renderChart(t, chartValueSets["helm-test"]...)
	pod := into[corev1.Pod](t, r.one(t, "Pod", "wirekube-relay-gateway-test"))
	mustf(t, pod.Annotations["helm.sh/hook"] == "test", "hook %q, want test", pod.Annotations["helm.sh/hook"])
	mustf(t, pod.Spec.ServiceAccountName == "wirekube-agent", "ServiceAccount %q", pod.Spec.ServiceAccountName)
	mustf(t, pod.Spec.RestartPolicy == corev1.RestartPolicyNever, "restartPolicy %q", pod.Spec.RestartPolicy)
	c := pod.Spec.Containers[0]
	mustf(t, slices.Equal(c.Command, []string{"/usr/local/bin/wirekube-relay-probe"}), "command %v", c.Command)
	o := probe.DefaultOptions()
	fs := flag.NewFlagSet("wirekube-relay-probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.AddFlags(fs)
	if err := cli.Parse(fs, c.Args); err != nil {
		t.Fatalf("probe args %v: %v", c.Args, err)
	}
	mustf(t, !o.Register, "the helm test registers with the relay (replaces the node's live session)")
	mustf(t, o.URL == "wss://relay.example.com/relay" && o.PublicKey == testPublicKey, "probe url %q key %q", o.URL, o.PublicKey)
	var audience string
	for _, v := range pod.Spec.Volumes {
		if v.Projected != nil && len(v.Projected.Sources) == 1 && v.Projected.Sources[0].ServiceAccountToken != nil {
			audience = v.Projected.Sources[0].ServiceAccountToken.Audience
			mustf(t, slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == v.Name && filepath.Join(m.MountPath, v.Projected.Sources[0].ServiceAccountToken.Path) == o.TokenFile
			}), "the probe's --token-file %q is not the projected token", o.TokenFile)
		}
	}
	mustf(t, audience == "wirekube-relay", "token audience %q, want wirekube-relay", audience)
}

// memoryFloor is the least memory limit a container may have for
// maxSessions, from the rules docs/deploy.md#memory states: Envoy's heap cap
// (384 MiB per 20,000 sessions, never below 384 MiB) plus 64 MiB; the
// bridge 64 MiB plus 16 KiB per session; extauthz 128 MiB plus 12 KiB per
// binding.
func memoryFloor(container string, maxSessions int64) int64 {
	const ki, mi = 1024, 1024 * 1024
	switch container {
	case "envoy":
		return max(384, maxSessions*384/20000)*mi + 64*mi
	case "bridge":
		return 64*mi + maxSessions*16*ki
	default:
		return 128*mi + maxSessions*12*ki
	}
}

// TestChartMemoryLimitsFollowMaxSessions: a memory limit in any unit of a
// Kubernetes quantity is compared in bytes with its container's floor for
// bridge.maxSessions; the expectation comes from apimachinery's own parser.
func TestChartMemoryLimitsFollowMaxSessions(t *testing.T) {
	for _, tc := range []struct {
		container, limit string
		sessions         int64
	}{
		{"envoy", "400M", 20000}, {"envoy", "300000Ki", 20000}, {"envoy", "469762048", 20000},
		{"envoy", "469762047", 20000}, {"envoy", "470e6", 20000}, {"envoy", "0.5Gi", 20000},
		{"envoy", "1Gi", 40000}, {"envoy", "832Mi", 40000}, {"envoy", "831Mi", 40000},
		{"bridge", "512Mi", 20000}, {"bridge", "512Mi", 40000}, {"bridge", "376Mi", 20000}, {"bridge", "377Mi", 20000},
		{"extauthz", "256Mi", 20000}, {"extauthz", "384Mi", 20000}, {"extauthz", "0.36Gi", 20000},
		{"extauthz", "1G", 60000}, {"extauthz", "831M", 60000},
		{"envoy", "0.4375Gi", 20000}, {"envoy", "0.4374Gi", 20000}, {"envoy", "4.6976205e8", 20000},
		{"envoy", "458752Ki", 20000}, {"envoy", "458751Ki", 20000}, {"bridge", ".5Gi", 20000}, {"bridge", "1E", 64511},
	} {
		t.Run(tc.container+"="+tc.limit+"/"+strconv.FormatInt(tc.sessions, 10), func(t *testing.T) {
			q, err := resource.ParseQuantity(tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			want := q.Value() >= memoryFloor(tc.container, tc.sessions)
			// The other containers get limits far above any floor here.
			set := fmt.Sprintf("bridge.maxSessions=%d,envoy.resources.limits.memory=4Gi,bridge.resources.limits.memory=4Gi,extauthz.resources.limits.memory=4Gi,%s.resources.limits.memory=%s",
				tc.sessions, tc.container, tc.limit)
			_, err = render.HelmTemplate(t.Context(), chartDir, namespace, "--set", set)
			if want {
				mustf(t, err == nil, "refused (%d bytes, floor %d): %v", q.Value(), memoryFloor(tc.container, tc.sessions), err)
				return
			}
			mustf(t, err != nil && strings.Contains(err.Error(), tc.container+".resources.limits.memory "+tc.limit),
				"rendered or refused without naming the value (%d bytes, floor %d): %v", q.Value(), memoryFloor(tc.container, tc.sessions), err)
		})
	}
}

// TestChartMemoryLimitNumberInValuesFile: a memory limit written as a bare
// number of bytes in a values file (which Helm reads as a float, 4.69762047e+08)
// is compared in bytes too.
func TestChartMemoryLimitNumberInValuesFile(t *testing.T) {
	floor := memoryFloor("envoy", 20000)
	for _, limit := range []int64{floor - 1, floor} {
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(fmt.Sprintf("envoy:\n  resources:\n    limits: {memory: %d}\n", limit)), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := render.HelmTemplate(t.Context(), chartDir, namespace, "-f", f)
		mustf(t, (err == nil) == (limit >= floor), "limit %d, floor %d: %v", limit, floor, err)
	}
}

// TestChartLoadBalancerSourceRanges: service.loadBalancerSourceRanges
// renders exactly the prefixes Go's netip.ParsePrefix accepts and refuses
// the rest naming the value.
func TestChartLoadBalancerSourceRanges(t *testing.T) {
	for _, cidr := range []string{"10.0.0.0/8", "192.168.1.7/32", "0.0.0.0/0", "2001:db8::/32", "::/0",
		"fe80:0:0:0:0:0:0:1/128", "10.0.0.0", "10.0.0.0/33", "256.0.0.0/8", "010.0.0.0/8", "10.0.0/24",
		"2001:db8:::/32", "2001:db8::/129", "1:2:3:4:5:6:7:8:9/64", "12345::/16", "10.0.0.0/08", "a.b.c.d/8"} {
		t.Run(cidr, func(t *testing.T) {
			_, perr := netip.ParsePrefix(cidr)
			out, err := render.HelmTemplate(t.Context(), chartDir, namespace, "--set", "service.type=LoadBalancer,service.loadBalancerSourceRanges[0]="+cidr)
			if perr == nil {
				mustf(t, err == nil && strings.Contains(string(out), cidr), "refused or dropped: %v", err)
				return
			}
			mustf(t, err != nil && strings.Contains(err.Error(), "service.loadBalancerSourceRanges") && strings.Contains(err.Error(), cidr),
				"rendered (netip: %v), want a refusal naming the value: %v", perr, err)
		})
	}
}

// TestChartReleaseNamespaceOutsideWireKube: installed into a namespace of
// its own, the gateway's ServiceAccount may still read Pods and
// ServiceAccounts in every namespace extauthz watches (those of
// --agent-service-account, --peer-namespace and --allow-service-account,
// docs/extauthz.md), each through a Role in that namespace bound to the
// ServiceAccount in the release namespace.
func TestChartReleaseNamespaceOutsideWireKube(t *testing.T) {
	const release = "relay-gw"
	out, err := render.HelmTemplate(t.Context(), chartDir, release, "--set", "extauthz.allowServiceAccounts={monitoring/prober}")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatal(err)
	}
	r := &rendered{dir: "chart in " + release, objs: objs}
	watched := map[string]bool{}
	for _, a := range container(r.deployment(t), "extauthz").Args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch name {
		case "agent-service-account", "allow-service-account":
			ns, _, _ := strings.Cut(value, "/")
			watched[ns] = true
		case "peer-namespace":
			watched[value] = true
		}
	}
	mustf(t, watched["wirekube-system"] && watched["monitoring"] && !watched[release], "extauthz watches %v", watched)
	for ns := range watched {
		var roles []string
		for _, u := range r.all("Role") {
			if u.GetNamespace() != ns {
				continue
			}
			g := grants(t, into[rbacv1.Role](t, u).Rules)
			if slices.Contains(g, grant{"", "pods", "get,list,watch"}) && slices.Contains(g, grant{"", "serviceaccounts", "get,list,watch"}) {
				roles = append(roles, u.GetName())
			}
		}
		mustf(t, len(roles) == 1, "namespace %s: Roles reading Pods and ServiceAccounts %v, want one", ns, roles)
		bound := false
		for _, u := range r.all("RoleBinding") {
			b := into[rbacv1.RoleBinding](t, u)
			if b.Namespace == ns && len(roles) == 1 && b.RoleRef.Name == roles[0] {
				bound = slices.Contains(b.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: "wirekube-relay-gateway", Namespace: release})
			}
		}
		mustf(t, bound, "namespace %s: no RoleBinding gives its Role to %s/wirekube-relay-gateway", ns, release)
	}
}

// TestChartDebugSessions: bridge.debugSessions turns the bridge's session
// listing on (the flag parses with the bridge's own flag set and
// validation), it is off by default, and NOTES warn while it is on.
func TestChartDebugSessions(t *testing.T) {
	mustf(t, !parseBridge(t, container(renderChart(t).deployment(t), "bridge").Args).DebugSessions, "the session listing is on by default")
	on := parseBridge(t, container(renderChart(t, "--set", "bridge.debugSessions=true").deployment(t), "bridge").Args)
	mustf(t, on.DebugSessions && on.MetricsListen != "", "bridge.debugSessions=true: --debug-sessions %v on %q", on.DebugSessions, on.MetricsListen)
	mustf(t, strings.Contains(renderNotes(t, "--set", "bridge.debugSessions=true"), "SESSION LISTING ON"), "NOTES do not warn of the listing")
	mustf(t, !strings.Contains(renderNotes(t), "SESSION LISTING ON"), "NOTES warn of a listing that is off")
}

// TestChartMovedAgentValues: extauthz.onReviewThrottled, bridge.drainRate
// and bridge.unreadyAt reach the flags (parsed by the binaries' own flag
// sets); the first two default to the binaries' defaults, unreadyAt to 95;
// the schema refuses a mode extauthz does not have, a negative rate and a
// percent above 100.
func TestChartMovedAgentValues(t *testing.T) {
	def := renderChart(t).deployment(t)
	mustf(t, parseExtauthz(t, container(def, "extauthz").Args).OnReviewThrottled == "deny", "default --on-review-throttled is not deny")
	mustf(t, parseBridge(t, container(def, "bridge").Args).DrainRate == 0, "default --drain-rate is not 0")
	mustf(t, parseBridge(t, container(def, "bridge").Args).UnreadyAt == 95, "default --unready-at is not 95")
	set := renderChart(t, "--set", "extauthz.onReviewThrottled=review-after,bridge.drainRate=75,bridge.drainTimeout=300s,bridge.unreadyAt=0").deployment(t)
	x := parseExtauthz(t, container(set, "extauthz").Args)
	mustf(t, x.OnReviewThrottled == "review-after", "extauthz.onReviewThrottled=review-after: --on-review-throttled=%q", x.OnReviewThrottled)
	b := parseBridge(t, container(set, "bridge").Args)
	mustf(t, b.DrainRate == 75, "bridge.drainRate=75: --drain-rate=%v", b.DrainRate)
	mustf(t, b.UnreadyAt == 0, "bridge.unreadyAt=0: --unready-at=%v", b.UnreadyAt)
	for bad, name := range map[string]string{"extauthz.onReviewThrottled=allow": "onReviewThrottled", "bridge.drainRate=-1": "drainRate",
		"bridge.unreadyAt=101": "unreadyAt"} {
		_, err := render.HelmTemplate(t.Context(), chartDir, namespace, "--set", bad)
		mustf(t, err != nil && strings.Contains(err.Error(), name), "%s: %v, want an error naming %s", bad, err, name)
	}
}

// TestChartDrainFollowsTimeout: with bridge.drainTimeout raised to 2m (and
// to a value that is not whole seconds), the Pod still outlasts the drain
// (checkDrain, as for the defaults).
func TestChartDrainFollowsTimeout(t *testing.T) {
	for _, v := range []string{"bridge.drainTimeout=2m", "bridge.drainTimeout=1m59500ms"} {
		t.Run(v, func(t *testing.T) { checkDrain(t, nil, renderChart(t, "--set", v).deployment(t)) })
	}
}
