package manifests

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const namespace = "wirekube-system"

// TestEnvoyConfigNoDrift: the ConfigMap holds exactly the files of envoy/,
// byte for byte. kustomize cannot read outside base/, so base/ keeps copies;
// this test is what keeps them honest.
func TestEnvoyConfigNoDrift(t *testing.T) {
	src, err := filepath.Glob("../envoy/*.yaml")
	if err != nil || len(src) == 0 {
		t.Fatalf("no configs in ../envoy: %v", err)
	}
	// The SDS resource file is a ConfigMap key under another name.
	copies := map[string]string{"sds-tls.yaml": "../envoy/" + envoyconfig.SDSConfig}
	for _, f := range src {
		copies[filepath.Base(f)] = f
	}
	cm := into[corev1.ConfigMap](t, renderDir(t, "base").one(t, "ConfigMap", ""))
	mustf(t, len(cm.Data) == len(copies), "ConfigMap has %d files, want %d (%v)", len(cm.Data), len(copies), copies)
	for name, f := range copies {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		copyData, err := os.ReadFile(filepath.Join("base", name))
		if err != nil {
			t.Errorf("base/%s missing: copy %s there", name, f)
			continue
		}
		mustf(t, string(copyData) == string(want), "base/%s differs from %s: copy it again", name, f)
		mustf(t, cm.Data[name] == string(want), "ConfigMap key %s differs from %s", name, f)
	}
}

func TestBase(t *testing.T) {
	r := renderDir(t, "base")
	d := r.deployment(t)
	for _, tc := range []struct {
		name  string
		check func(t *testing.T, r *rendered, d *appsv1.Deployment)
	}{
		{"namespace", checkNamespace},
		{"security_context", checkSecurityContext},
		{"probes", checkProbes},
		{"resources", checkResources},
		{"replicas_and_spread", checkSpread},
		{"pod_disruption_budget", checkPDB},
		{"sidecars_on_loopback", checkLoopback},
		{"ports_match_envoy_config", checkEnvoyPorts},
		{"tls_secret_mounted", checkTLSMount},
		{"service_443_to_envoy", checkService},
		{"binary_flags_exist", checkBinaryFlags},
		{"rbac_least_privilege", checkRBAC},
		{"network_policy_relay_control", checkRelayPolicy},
		{"prometheus_scrape", checkScrape},
		{"graceful_drain", checkDrain},
		{"api_token_only_in_extauthz", checkAPIToken},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, r, d) })
	}
}

func checkNamespace(t *testing.T, r *rendered, _ *appsv1.Deployment) {
	for _, o := range r.objs {
		if o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding" {
			continue
		}
		mustf(t, o.GetNamespace() == wantNamespace(o), "%s %s in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
	}
}

// wantNamespace is the namespace o must be in: the gateway's, except the
// Events Role and RoleBinding, in default (kube-apiserver takes Events about
// cluster-scoped objects only there).
func wantNamespace(o *unstructured.Unstructured) string {
	if (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") && o.GetName() == "wirekube-relay-gateway-extauthz-events" {
		return "default"
	}
	return namespace
}

func checkSecurityContext(t *testing.T, _ *rendered, d *appsv1.Deployment) {
	ps := d.Spec.Template.Spec
	mustf(t, ps.SecurityContext != nil && ptrTrue(ps.SecurityContext.RunAsNonRoot), "pod: runAsNonRoot not set")
	mustf(t, ps.SecurityContext != nil && ps.SecurityContext.SeccompProfile != nil &&
		ps.SecurityContext.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "pod: seccomp not RuntimeDefault")
	mustf(t, !ps.HostNetwork && !ps.HostPID && !ps.HostIPC, "pod shares a host namespace")
	for _, c := range ps.Containers {
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", c.Name)
			continue
		}
		mustf(t, ptrTrue(sc.RunAsNonRoot), "%s: runAsNonRoot", c.Name)
		mustf(t, ptrTrue(sc.ReadOnlyRootFilesystem), "%s: readOnlyRootFilesystem", c.Name)
		mustf(t, sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "%s: allowPrivilegeEscalation", c.Name)
		mustf(t, sc.Privileged == nil || !*sc.Privileged, "%s: privileged", c.Name)
		mustf(t, sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) &&
			len(sc.Capabilities.Add) == 0, "%s: capabilities must drop ALL and add none", c.Name)
		mustf(t, sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "%s: seccomp", c.Name)
	}
}

func ptrTrue(b *bool) bool { return b != nil && *b }

func checkProbes(t *testing.T, _ *rendered, d *appsv1.Deployment) {
	names := []string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
		mustf(t, c.ReadinessProbe != nil && c.LivenessProbe != nil, "%s: readiness and liveness probes required", c.Name)
	}
	mustf(t, slices.Equal(names, []string{"envoy", "extauthz", "bridge"}), "containers %v, want envoy, extauthz, bridge", names)
	e := container(d, "envoy")
	if e == nil || e.ReadinessProbe == nil || e.ReadinessProbe.HTTPGet == nil {
		t.Fatalf("envoy readiness must be an HTTP GET through Envoy")
	}
	g := e.ReadinessProbe.HTTPGet
	mustf(t, g.Path == "/readyz" && g.Scheme == corev1.URISchemeHTTPS && g.Port.String() == "https",
		"envoy readiness %s %s on %s, want HTTPS /readyz on https", g.Scheme, g.Path, g.Port.String())
	for _, n := range []string{"extauthz", "bridge"} {
		c := container(d, n)
		mustf(t, c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz", "%s readiness not /readyz", n)
		mustf(t, c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/healthz", "%s liveness not /healthz", n)
	}
}

func checkResources(t *testing.T, _ *rendered, d *appsv1.Deployment) {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, lim := c.Resources.Requests[res], c.Resources.Limits[res]
			mustf(t, !req.IsZero() && !lim.IsZero() && req.Cmp(lim) <= 0, "%s: %s request %v limit %v", c.Name, res, req.String(), lim.String())
		}
	}
}

func checkSpread(t *testing.T, _ *rendered, d *appsv1.Deployment) {
	mustf(t, d.Spec.Replicas != nil && *d.Spec.Replicas >= 2, "replicas %v, want at least 2", d.Spec.Replicas)
	ok := slices.ContainsFunc(d.Spec.Template.Spec.TopologySpreadConstraints, func(c corev1.TopologySpreadConstraint) bool {
		return c.TopologyKey == "kubernetes.io/hostname" && c.WhenUnsatisfiable == corev1.DoNotSchedule && c.MaxSkew == 1 &&
			c.LabelSelector != nil && selects(c.LabelSelector.MatchLabels, d.Spec.Template.Labels)
	})
	mustf(t, ok, "no hard spread across nodes (kubernetes.io/hostname, DoNotSchedule)")
}

// selects reports whether a non-empty selector matches labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkPDB(t *testing.T, r *rendered, d *appsv1.Deployment) {
	p := into[policyv1.PodDisruptionBudget](t, r.one(t, "PodDisruptionBudget", ""))
	mustf(t, p.Spec.Selector != nil && selects(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels), "PDB does not select the gateway Pods")
	ok := (p.Spec.MinAvailable != nil && p.Spec.MinAvailable.IntValue() >= 1) || (p.Spec.MaxUnavailable != nil && p.Spec.MaxUnavailable.IntValue() == 1)
	mustf(t, ok, "PDB must keep at least one Pod (minAvailable >= 1 or maxUnavailable 1)")
}

func checkLoopback(t *testing.T, _ *rendered, d *appsv1.Deployment) {
	for _, f := range []struct{ c, flag string }{{"extauthz", "grpc-listen"}, {"bridge", "listen"}} {
		v, _ := flagValue(container(d, f.c).Args, f.flag)
		mustf(t, isLoopback(v), "%s --%s=%q, want a loopback address", f.c, f.flag, v)
	}
	v, set := flagValue(container(d, "extauthz").Args, "http-listen")
	mustf(t, set && (v == "" || isLoopback(v)), "extauthz --http-listen=%q: set it empty (disabled) or loopback", v)
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

// envoyConfig decodes the config file the Envoy container is started with,
// from the rendered ConfigMap.
func envoyConfig(t *testing.T, r *rendered, d *appsv1.Deployment) *bootstrapv3.Bootstrap {
	t.Helper()
	e := container(d, "envoy")
	i := slices.Index(e.Args, "--config-path")
	if i < 0 || i+1 >= len(e.Args) {
		t.Fatalf("envoy args %v: no --config-path", e.Args)
	}
	dir, file := filepath.Split(e.Args[i+1])
	mount := slices.IndexFunc(e.VolumeMounts, func(m corev1.VolumeMount) bool { return filepath.Clean(m.MountPath) == filepath.Clean(dir) })
	if mount < 0 {
		t.Fatalf("envoy config %s is not under a volume mount", e.Args[i+1])
	}
	cmName := ""
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == e.VolumeMounts[mount].Name && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	cm := into[corev1.ConfigMap](t, r.one(t, "ConfigMap", cmName))
	b, err := envoyconfig.Decode([]byte(cm.Data[file]))
	if err != nil {
		t.Fatalf("ConfigMap %s key %s: %v", cmName, file, err)
	}
	return b
}

func checkEnvoyPorts(t *testing.T, r *rendered, d *appsv1.Deployment) {
	b := envoyConfig(t, r, d)
	eps := clusterEndpoints(b)
	ga, _ := flagValue(container(d, "extauthz").Args, "grpc-listen")
	la, _ := flagValue(container(d, "bridge").Args, "listen")
	mustf(t, eps["extauthz"] == ga, "envoy extauthz cluster %q, extauthz --grpc-listen %q", eps["extauthz"], ga)
	mustf(t, eps["bridge"] == la, "envoy bridge cluster %q, bridge --listen %q", eps["bridge"], la)
	ports := map[string]int32{}
	for _, p := range container(d, "envoy").Ports {
		ports[p.Name] = p.ContainerPort
	}
	for _, l := range b.GetStaticResources().GetListeners() {
		port := int32(l.GetAddress().GetSocketAddress().GetPortValue())
		mustf(t, slices.Contains(mapsValues(ports), port), "listener %s port %d is not a container port %v", l.GetName(), port, ports)
	}
	ct, _ := flagValue(container(d, "extauthz").Args, "check-timeout")
	check, err := time.ParseDuration(ct)
	mustf(t, err == nil, "extauthz --check-timeout=%q: %v", ct, err)
	mustf(t, extAuthzTimeout(t, b) > check, "envoy ext_authz timeout %v not above --check-timeout %v", extAuthzTimeout(t, b), check)
}

func mapsValues(m map[string]int32) []int32 {
	var out []int32
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func clusterEndpoints(b *bootstrapv3.Bootstrap) map[string]string {
	out := map[string]string{}
	for _, c := range b.GetStaticResources().GetClusters() {
		for _, e := range c.GetLoadAssignment().GetEndpoints() {
			for _, lb := range e.GetLbEndpoints() {
				sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
				out[c.GetName()] = net.JoinHostPort(sa.GetAddress(), strconv.FormatUint(uint64(sa.GetPortValue()), 10))
			}
		}
	}
	return out
}

func extAuthzTimeout(t *testing.T, b *bootstrapv3.Bootstrap) time.Duration {
	t.Helper()
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig().UnmarshalTo(hcm) != nil {
					continue
				}
				for _, hf := range hcm.GetHttpFilters() {
					a := &extauthzv3.ExtAuthz{}
					if hf.GetTypedConfig().UnmarshalTo(a) == nil {
						return a.GetGrpcService().GetTimeout().AsDuration()
					}
				}
			}
		}
	}
	t.Fatal("no ext_authz filter in the envoy config")
	return 0
}

// checkAPIToken: the Pod does not automount its ServiceAccount token; only
// extauthz, the one container that calls the API, mounts a projected one.
func checkAPIToken(t *testing.T, _ *rendered, d *appsv1.Deployment) {
	ps := d.Spec.Template.Spec
	mustf(t, ps.AutomountServiceAccountToken != nil && !*ps.AutomountServiceAccountToken, "automountServiceAccountToken must be false")
	tokenVols := map[string]bool{}
	for _, v := range ps.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				tokenVols[v.Name] = true
			}
		}
	}
	for _, c := range ps.Containers {
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return tokenVols[m.Name] })
		mustf(t, mounted == (c.Name == "extauthz"), "%s: API token mounted=%v, want it in extauthz only", c.Name, mounted)
	}
}
