package manifests

import (
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	downstreamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	fixedheapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

// testPublicKey is a well-formed WireGuard public key (32 bytes, base64).
const testPublicKey = "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80="

// podOptionValues sets every scheduling and metadata value of the Pod.
var podOptionValues = []string{
	"--set", "imagePullSecrets[0].name=regcred",
	"--set", "nodeSelector.pool=edge",
	"--set", "tolerations[0].key=dedicated,tolerations[0].operator=Exists,tolerations[0].effect=NoSchedule",
	"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool",
	"--set", "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists",
	"--set", "podAnnotations.team=net,podLabels.tier=edge",
	"--set", "service.type=LoadBalancer,service.externalTrafficPolicy=Local",
	"--set", "service.annotations.service\\.beta\\.kubernetes\\.io/aws-load-balancer-type=external",
	"--set", "image.digest=sha256:" + strings.Repeat("ab", 32),
}

// listened is what one container really listens on: the ports of its
// listen flags (extauthz, bridge) or of its Envoy config's listeners.
func listened(t *testing.T, r *rendered, d *appsv1.Deployment, c *corev1.Container) map[int32]bool {
	t.Helper()
	out := map[int32]bool{}
	if c.Name == "envoy" {
		for _, l := range envoyConfig(t, r, d).GetStaticResources().GetListeners() {
			out[int32(l.GetAddress().GetSocketAddress().GetPortValue())] = true
		}
		return out
	}
	for _, f := range []string{"listen", "grpc-listen", "http-listen", "metrics-listen"} {
		v, ok := flagValue(c.Args, f)
		if !ok || v == "" {
			continue // not given, or empty: that listener is off
		}
		_, port, err := net.SplitHostPort(v)
		p, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			t.Fatalf("%s --%s=%q: not host:port", c.Name, f, v)
		}
		out[int32(p)] = true
	}
	return out
}

// resolvePort turns a probe's or Service's port (a number or a name) into
// the container port it means; 0 when the name is no container port.
func resolvePort(c *corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return 0
}

func probePorts(c *corev1.Container) map[string]intstr.IntOrString {
	out := map[string]intstr.IntOrString{}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		switch {
		case p == nil:
		case p.HTTPGet != nil:
			out[name] = p.HTTPGet.Port
		case p.TCPSocket != nil:
			out[name] = p.TCPSocket.Port
		}
	}
	return out
}

// TestChartShapesListen: in every value set the chart accepts, each
// container's ports, probes and the Services' target ports name a port the
// container really listens on (its flags, or its Envoy config), and every
// volume mount has its volume (the TLS Secret exactly when the Envoy
// listener terminates TLS).
func TestChartShapesListen(t *testing.T) {
	for name, extra := range chartValueSets {
		t.Run(name, func(t *testing.T) {
			r := renderChart(t, extra...)
			d := r.deployment(t)
			checkPortsListen(t, r, d)
			checkVolumes(t, r, d)
		})
	}
}

func checkPortsListen(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	byName := map[string]int32{}
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		l := listened(t, r, d, c)
		for _, cp := range c.Ports {
			mustf(t, l[cp.ContainerPort], "%s: containerPort %s %d, but it listens on %v", c.Name, cp.Name, cp.ContainerPort, l)
			byName[cp.Name] = cp.ContainerPort
		}
		for probe, p := range probePorts(c) {
			got := resolvePort(c, p)
			mustf(t, got != 0 && l[got], "%s: %s probe on %s (%d), but it listens on %v", c.Name, probe, p.String(), got, l)
		}
	}
	for _, u := range r.all("Service") {
		svc := into[corev1.Service](t, u)
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			continue // the metrics Service of the ServiceMonitor: same names, checked below too
		}
		for _, sp := range svc.Spec.Ports {
			port := sp.TargetPort.IntVal
			if sp.TargetPort.Type == intstr.String {
				port = byName[sp.TargetPort.StrVal]
			}
			mustf(t, port != 0, "Service %s port %d: targetPort %s is no container port (%v)", svc.Name, sp.Port, sp.TargetPort.String(), byName)
		}
	}
}

func checkVolumes(t *testing.T, r *rendered, d *appsv1.Deployment) {
	t.Helper()
	ps := d.Spec.Template.Spec
	vols := map[string]corev1.Volume{}
	for _, v := range ps.Volumes {
		vols[v.Name] = v
	}
	used := map[string]bool{}
	for _, c := range ps.Containers {
		for _, m := range c.VolumeMounts {
			_, ok := vols[m.Name]
			mustf(t, ok, "%s mounts %s, which is no volume", c.Name, m.Name)
			used[m.Name] = true
		}
	}
	for name := range vols {
		mustf(t, used[name], "volume %s is mounted by no container", name)
	}
	// The shared identity signing key (front=none) is extauthz's alone;
	// every other Secret volume is Envoy's TLS certificate.
	for _, c := range ps.Containers {
		for _, m := range c.VolumeMounts {
			mustf(t, m.Name != "identity-signing" || c.Name == "extauthz", "%s mounts the identity signing key", c.Name)
		}
	}
	secrets := slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Secret != nil && v.Name != "identity-signing" })
	e := container(d, "envoy")
	if e == nil {
		mustf(t, !secrets, "no Envoy, yet a Secret volume")
		return
	}
	mustf(t, secrets == terminatesTLS(envoyConfig(t, r, d)), "TLS Secret mounted=%v, Envoy listener terminates TLS=%v", secrets, terminatesTLS(envoyConfig(t, r, d)))
}

func terminatesTLS(b *bootstrapv3.Bootstrap) bool {
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			if fc.GetTransportSocket() != nil {
				return true
			}
		}
	}
	return false
}

// TestChartPlaintextMatchesComponent: envoy.config=envoy-plaintext.yaml
// renders the base with components/plaintext-envoy (the kustomize shape
// that becomes ready: 8080, HTTP probes, no TLS Secret).
func TestChartPlaintextMatchesComponent(t *testing.T) {
	kust := renderKustomization(t, "resources:\n- ../../base\ncomponents:\n- ../../components/plaintext-envoy\n")
	sameObjects(t, withoutPeerAdmission(renderChart(t, chartValueSets["plaintext"]...).objs), kust.objs)
}

// TestEnvoyLimitsFollowMaxSessions: Envoy's per-Pod limits are derived from
// bridge.maxSessions; the expected numbers are written out here.
func TestEnvoyLimitsFollowMaxSessions(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		extra                    []string
		sessions, cb, downstream uint64
		heap                     uint64
	}{
		{"default", nil, 20000, 20000, 25000, 384 << 20},
		{"40000 sessions", []string{"--set", "bridge.maxSessions=40000,envoy.resources.limits.memory=1Gi,bridge.resources.limits.memory=768Mi,extauthz.resources.limits.memory=640Mi"}, 40000, 40000, 50000, 768 << 20},
		{"1000 sessions keeps the heap floor", []string{"--set", "bridge.maxSessions=1000"}, 1000, 1000, 1250, 384 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := renderChart(t, tc.extra...)
			d := r.deployment(t)
			checkEnvoyLimits(t, envoyConfig(t, r, d), container(d, "bridge"), tc.sessions, tc.cb, tc.downstream, tc.heap)
		})
	}
	t.Run("base", func(t *testing.T) {
		r := renderDir(t, "base")
		d := r.deployment(t)
		checkEnvoyLimits(t, envoyConfig(t, r, d), container(d, "bridge"), 20000, 20000, 25000, 384<<20)
	})
}

func checkEnvoyLimits(t *testing.T, b *bootstrapv3.Bootstrap, bridge *corev1.Container, sessions, cb, downstream, heap uint64) {
	t.Helper()
	v, _ := flagValue(bridge.Args, "max-sessions")
	mustf(t, v == strconv.FormatUint(sessions, 10), "bridge --max-sessions=%s, want %d", v, sessions)
	for _, c := range b.GetStaticResources().GetClusters() {
		if c.GetName() != "bridge" {
			continue
		}
		th := c.GetCircuitBreakers().GetThresholds()
		mustf(t, len(th) == 1 && uint64(th[0].GetMaxConnections().GetValue()) == cb && uint64(th[0].GetMaxRequests().GetValue()) == cb,
			"bridge circuit breaker %v, want max_connections = max_requests = %d", th, cb)
	}
	var gotDown, gotHeap uint64
	for _, m := range b.GetOverloadManager().GetResourceMonitors() {
		dc, fh := &downstreamv3.DownstreamConnectionsConfig{}, &fixedheapv3.FixedHeapConfig{}
		switch {
		case m.GetTypedConfig().UnmarshalTo(dc) == nil:
			gotDown = uint64(dc.GetMaxActiveDownstreamConnections())
		case m.GetTypedConfig().UnmarshalTo(fh) == nil:
			gotHeap = fh.GetMaxHeapSizeBytes()
		}
	}
	mustf(t, gotDown == downstream, "overload manager max_active_downstream_connections %d, want %d", gotDown, downstream)
	mustf(t, gotHeap == heap, "overload manager max_heap_size_bytes %d, want %d", gotHeap, heap)
	// The per-source upgrade bucket holds a whole replica's reconnect storm
	// behind one address, for every address the overload manager admits.
	for _, l := range b.GetStaticResources().GetListeners() {
		if !strings.HasPrefix(l.GetName(), "relay_") {
			continue
		}
		src, err := envoyconfig.RelaySourceLimit(b, l.GetName())
		mustf(t, err == nil && uint64(src.Burst) == sessions && uint64(src.Buckets) == downstream,
			"per-source limit %+v (%v), want a burst of %d and %d buckets", src, err, sessions, downstream)
	}
}

// TestChartPDB: maxUnavailable with unready Pods evictable by default, none
// for one replica (a PDB over one Pod freezes every drain) or when disabled.
func TestChartPDB(t *testing.T) {
	r := renderChart(t)
	p := into[policyv1.PodDisruptionBudget](t, r.one(t, "PodDisruptionBudget", "wirekube-relay-gateway"))
	mustf(t, p.Spec.MinAvailable == nil && p.Spec.MaxUnavailable != nil && p.Spec.MaxUnavailable.IntValue() == 1,
		"PDB minAvailable %v maxUnavailable %v, want maxUnavailable 1 only", p.Spec.MinAvailable, p.Spec.MaxUnavailable)
	mustf(t, p.Spec.UnhealthyPodEvictionPolicy != nil && *p.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow,
		"unhealthyPodEvictionPolicy %v, want AlwaysAllow (a relay outage makes every Pod unready)", p.Spec.UnhealthyPodEvictionPolicy)
	for name, extra := range map[string][]string{
		"one replica": {"--set", "replicas=1"},
		"disabled":    {"--set", "podDisruptionBudget.enabled=false"},
	} {
		mustf(t, len(renderChart(t, extra...).all("PodDisruptionBudget")) == 0, "%s: a PDB is rendered", name)
	}
}

// TestChartRevocationOff: an empty bridge.revocationAddr reaches the bridge
// as an empty --revocation-addr (the flag's default is on).
func TestChartRevocationOff(t *testing.T) {
	d := renderChart(t, chartValueSets["revocation-off"]...).deployment(t)
	v, set := flagValue(container(d, "bridge").Args, "revocation-addr")
	mustf(t, set && v == "", "bridge --revocation-addr=%q set=%v, want it given and empty", v, set)
	o := parseBridge(t, container(d, "bridge").Args)
	mustf(t, o.RevocationAddr == "", "the bridge parses the rendered args to revocation address %q, want off", o.RevocationAddr)
}

// TestChartPeerEventsOff: extauthz.peerEvents=false turns the flag off and
// drops the Events Role (the default renders both: TestChartMatchesBase).
func TestChartPeerEventsOff(t *testing.T) {
	r := renderChart(t, chartValueSets["peer-events-off"]...)
	v, set := flagValue(container(r.deployment(t), "extauthz").Args, "peer-events")
	mustf(t, set && v == "false", "extauthz --peer-events=%q set=%v, want false", v, set)
	for _, kind := range []string{"Role", "RoleBinding"} {
		for _, o := range r.all(kind) {
			mustf(t, o.GetNamespace() != "default", "%s %s in default with peerEvents=false", kind, o.GetName())
		}
	}
	checkRBAC(t, r, r.deployment(t))
}

// TestChartPodOptions: scheduling, metadata, Service and digest values
// reach the rendered objects; the release is on the Pods, not in the
// selector.
func TestChartPodOptions(t *testing.T) {
	r := renderChart(t, podOptionValues...)
	d := r.deployment(t)
	ps := d.Spec.Template.Spec
	mustf(t, len(ps.ImagePullSecrets) == 1 && ps.ImagePullSecrets[0].Name == "regcred", "imagePullSecrets %v", ps.ImagePullSecrets)
	mustf(t, ps.NodeSelector["pool"] == "edge", "nodeSelector %v", ps.NodeSelector)
	mustf(t, len(ps.Tolerations) == 1 && ps.Tolerations[0].Key == "dedicated", "tolerations %v", ps.Tolerations)
	mustf(t, ps.Affinity != nil && ps.Affinity.NodeAffinity != nil, "affinity %v", ps.Affinity)
	lbl, ann := d.Spec.Template.Labels, d.Spec.Template.Annotations
	mustf(t, lbl["tier"] == "edge" && lbl["app.kubernetes.io/instance"] == "wirekube-relay-gateway", "Pod labels %v", lbl)
	mustf(t, ann["team"] == "net", "Pod annotations %v", ann)
	mustf(t, len(d.Spec.Selector.MatchLabels) == 1, "selector %v, want only app.kubernetes.io/name", d.Spec.Selector.MatchLabels)
	want := "ghcr.io/wirekube/relay-ws@sha256:" + strings.Repeat("ab", 32)
	for _, n := range []string{"extauthz", "bridge"} {
		mustf(t, container(d, n).Image == want, "%s image %q, want %q", n, container(d, n).Image, want)
	}
	svc := into[corev1.Service](t, r.one(t, "Service", "wirekube-relay-gateway"))
	mustf(t, svc.Spec.Type == corev1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
		"Service type %s externalTrafficPolicy %s", svc.Spec.Type, svc.Spec.ExternalTrafficPolicy)
	mustf(t, svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] == "external", "Service annotations %v", svc.Annotations)
}

// TestChartOperatorOptions: priorityClassName, topologySpreadConstraints
// (an entry without a selector spreads the gateway's Pods), commonLabels
// on every object and Pod but in no selector, and extraEnv /
// extraVolumeMounts per container over extraVolumes.
func TestChartOperatorOptions(t *testing.T) {
	r := renderChart(t, "--set", "priorityClassName=gw-critical,commonLabels.team=net,"+
		"topologySpreadConstraints[0].maxSkew=2,topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone,topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule,"+
		"extraVolumes[0].name=extra-ca,extraVolumes[0].configMap.name=extra-ca,"+
		"envoy.extraEnv[0].name=E,envoy.extraEnv[0].value=envoy,extauthz.extraEnv[0].name=E,extauthz.extraEnv[0].value=extauthz,bridge.extraEnv[0].name=E,bridge.extraEnv[0].value=bridge,"+
		"envoy.extraVolumeMounts[0].name=extra-ca,envoy.extraVolumeMounts[0].mountPath=/etc/extra-ca,"+
		"extauthz.extraVolumeMounts[0].name=extra-ca,extauthz.extraVolumeMounts[0].mountPath=/etc/extra-ca,"+
		"bridge.extraVolumeMounts[0].name=extra-ca,bridge.extraVolumeMounts[0].mountPath=/etc/extra-ca")
	d := r.deployment(t)
	ps := d.Spec.Template.Spec
	mustf(t, ps.PriorityClassName == "gw-critical", "priorityClassName %q", ps.PriorityClassName)
	mustf(t, len(ps.TopologySpreadConstraints) == 1, "spread %v, want the one given", ps.TopologySpreadConstraints)
	c := ps.TopologySpreadConstraints[0]
	mustf(t, c.MaxSkew == 2 && c.TopologyKey == "topology.kubernetes.io/zone" && c.LabelSelector != nil &&
		maps.Equal(c.LabelSelector.MatchLabels, d.Spec.Selector.MatchLabels), "spread %+v, want the gateway's selector filled in", c)
	for _, o := range r.objs {
		mustf(t, o.GetLabels()["team"] == "net", "%s %s lacks commonLabels", o.GetKind(), o.GetName())
	}
	mustf(t, d.Spec.Template.Labels["team"] == "net", "Pod labels %v lack commonLabels", d.Spec.Template.Labels)
	for name, sel := range selectorsOf(t, r) {
		mustf(t, !strings.Contains(sel.String(), "team"), "%s selects by a commonLabel: %s", name, sel)
	}
	mustf(t, slices.ContainsFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == "extra-ca" && v.ConfigMap != nil }), "extraVolumes not rendered")
	for _, name := range []string{"envoy", "extauthz", "bridge"} {
		ct := container(d, name)
		mustf(t, slices.ContainsFunc(ct.Env, func(e corev1.EnvVar) bool { return e.Name == "E" && e.Value == name }), "%s env %v", name, ct.Env)
		mustf(t, slices.ContainsFunc(ct.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "extra-ca" && m.MountPath == "/etc/extra-ca" }),
			"%s mounts %v", name, ct.VolumeMounts)
	}
	none := renderChart(t, "--set", "topologySpreadConstraints=null").deployment(t)
	mustf(t, len(none.Spec.Template.Spec.TopologySpreadConstraints) == 0, "topologySpreadConstraints=null renders %v", none.Spec.Template.Spec.TopologySpreadConstraints)
}

// TestChartNoAutoscaler: no value set renders a HorizontalPodAutoscaler,
// and docs/deploy.md#autoscaling gives the reason, naming the capacity
// alert the chart ships instead.
func TestChartNoAutoscaler(t *testing.T) {
	for name, extra := range chartValueSets {
		mustf(t, len(renderChart(t, extra...).all("HorizontalPodAutoscaler")) == 0, "%s renders an HPA", name)
	}
	s := readDoc(t, "../docs/deploy.md")
	mustf(t, strings.Contains(s, `<a id="autoscaling"></a>`) && strings.Contains(s, "WireKubeRelayGatewayNearCapacity"),
		"docs/deploy.md does not say why there is no autoscaler")
	rules, err := os.ReadFile(filepath.Join(chartDir, "files", "prometheusrule-spec.yaml"))
	mustf(t, err == nil && strings.Contains(string(rules), "alert: WireKubeRelayGatewayNearCapacity"), "the capacity alert is gone: %v", err)
}
