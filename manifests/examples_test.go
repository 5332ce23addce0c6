package manifests

import (
	"github.com/wirekube/relay-ws/internal/test/netpol"
	"github.com/wirekube/relay-ws/internal/test/render"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/wirekube/relay-ws/internal/contract"
)

const agentKeepaliveSeconds = 25

// exampleChecks has one entry per directory under examples/; a new example
// without checks fails TestExamplesCovered.
func exampleChecks() map[string]func(t *testing.T, r *rendered) {
	return map[string]func(t *testing.T, r *rendered){
		"agent-token":         checkAgentToken,
		"alb-ingress":         checkALB,
		"envoy-gateway":       checkEnvoyGateway,
		"gateway-api":         checkGatewayAPI,
		"ingress-nginx":       checkIngressNginx,
		"istio":               checkIstio,
		"mesh-external":       func(t *testing.T, r *rendered) { checkMesh(t, r, "external") },
		"mesh-managed":        func(t *testing.T, r *rendered) { checkMesh(t, r, "managed") },
		"peer-admission":      checkPeerAdmissionExample,
		"peer-serviceaccount": checkPeerServiceAccount,
		"prometheus":          checkPodMonitor,
		"relay-lockdown":      func(t *testing.T, r *rendered) { checkFlows(t, r, netpol.Shape{}) },
	}
}

func TestExamplesCovered(t *testing.T) {
	entries, err := os.ReadDir("examples")
	if err != nil {
		t.Fatal(err)
	}
	checks := exampleChecks()
	var dirs []string
	for _, e := range entries {
		if e.IsDir() {
			dirs = append(dirs, "examples/"+e.Name())
			mustf(t, checks[e.Name()] != nil, "examples/%s has no checks in exampleChecks", e.Name())
		}
	}
	want := slices.DeleteFunc(render.Dirs(), func(d string) bool { return d == "base" })
	mustf(t, slices.Equal(dirs, want), "Dirs() lists %v, examples/ holds %v", want, dirs)
}

func TestExamples(t *testing.T) {
	for name, check := range exampleChecks() {
		t.Run(name, func(t *testing.T) {
			r := renderDir(t, filepath.Join("examples", name))
			for _, o := range r.objs {
				ns := o.GetNamespace()
				mustf(t, ns == "" || ns == wantNamespace(o), "%s %s in namespace %q", o.GetKind(), o.GetName(), ns)
			}
			check(t, r)
		})
	}
}

func checkALB(t *testing.T, r *rendered) {
	ing := into[networkingv1.Ingress](t, r.one(t, "Ingress", ""))
	a := ing.Annotations
	idle := annotationInt(a["alb.ingress.kubernetes.io/load-balancer-attributes"], "idle_timeout.timeout_seconds=")
	mustf(t, idle >= 4*agentKeepaliveSeconds, "ALB idle timeout %ds, want at least %ds", idle, 4*agentKeepaliveSeconds)
	mustf(t, a["alb.ingress.kubernetes.io/backend-protocol"] == "HTTPS", "ALB must speak TLS to Envoy's TLS listener")
	mustf(t, strings.Contains(a["alb.ingress.kubernetes.io/listen-ports"], `"HTTPS"`), "ALB listener is not HTTPS")
	checkRelayPath(t, ing, "https")
	checkBaseIntact(t, r)
}

func annotationInt(v, key string) int {
	for _, kv := range strings.Split(v, ",") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(kv), key); ok {
			n, _ := strconv.Atoi(s)
			return n
		}
	}
	return 0
}

func checkRelayPath(t *testing.T, ing *networkingv1.Ingress, port string) {
	t.Helper()
	if len(ing.Spec.Rules) != 1 || ing.Spec.Rules[0].HTTP == nil || len(ing.Spec.Rules[0].HTTP.Paths) != 1 {
		t.Fatalf("want one rule with one path, got %+v", ing.Spec.Rules)
	}
	p := ing.Spec.Rules[0].HTTP.Paths[0]
	mustf(t, p.Path == contract.DefaultRelayPath && p.PathType != nil && *p.PathType == networkingv1.PathTypeExact,
		"Ingress path %s, want Exact %s", p.Path, contract.DefaultRelayPath)
	mustf(t, p.Backend.Service != nil && p.Backend.Service.Name == "wirekube-relay-gateway" && p.Backend.Service.Port.Name == port,
		"Ingress backend %+v, want wirekube-relay-gateway port %s", p.Backend.Service, port)
}

// checkBaseIntact: examples that keep Envoy keep the base's protections.
func checkBaseIntact(t *testing.T, r *rendered) {
	t.Helper()
	d := r.deployment(t)
	checkSecurityContext(t, r, d)
	checkAPIToken(t, r, d)
	checkRBAC(t, r, d)
	checkContainerFlags(t, d)
	checkEnvoyPorts(t, r, d)
	checkLoopback(t, r, d)
}

func checkGatewayAPI(t *testing.T, r *rendered) {
	d := r.deployment(t)
	e := container(d, "envoy")
	mustf(t, slices.Contains(e.Args, "/etc/envoy/config/envoy-plaintext.yaml"), "envoy args %v, want the plaintext config", e.Args)
	mustf(t, e.ReadinessProbe.HTTPGet.Scheme == corev1.URISchemeHTTP && e.ReadinessProbe.HTTPGet.Port.String() == "http",
		"envoy readiness must use the plaintext port")
	mustf(t, !slices.ContainsFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Secret != nil }),
		"the TLS Secret volume should be gone with TLS")
	svc := into[corev1.Service](t, r.one(t, "Service", "wirekube-relay-gateway"))
	mustf(t, len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].TargetPort.String() == "http", "Service ports %v", svc.Spec.Ports)
	route := r.one(t, "HTTPRoute", "")
	checkHTTPRoute(t, route, "wirekube-relay-gateway", int64(svc.Spec.Ports[0].Port))
	checkBaseIntact(t, r)
}

func checkHTTPRoute(t *testing.T, route *unstructured.Unstructured, svc string, port int64) {
	t.Helper()
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	if len(rules) != 1 {
		t.Fatalf("HTTPRoute has %d rules, want 1", len(rules))
	}
	rule := rules[0].(map[string]any)
	matches, _, _ := unstructured.NestedSlice(rule, "matches")
	backends, _, _ := unstructured.NestedSlice(rule, "backendRefs")
	mustf(t, len(matches) == 1 && str(matches[0].(map[string]any), "path", "type") == "Exact" &&
		str(matches[0].(map[string]any), "path", "value") == contract.DefaultRelayPath, "HTTPRoute match %v", matches)
	mustf(t, str(rule, "timeouts", "request") == "0s", "HTTPRoute request timeout must be 0s for WebSockets")
	ok := len(backends) == 1 && str(backends[0].(map[string]any), "name") == svc
	if ok {
		// Decoded YAML numbers arrive as int64 or float64.
		switch p := backends[0].(map[string]any)["port"].(type) {
		case int64:
			ok = p == port
		case float64:
			ok = int64(p) == port
		default:
			ok = false
		}
	}
	mustf(t, ok, "HTTPRoute backends %v, want %s:%d", backends, svc, port)
}

// checkWithoutEnvoy: the proxy-calls-extauthz layout. The bridge trusts its
// identity headers, so it must be reachable only by the proxy.
func checkWithoutEnvoy(t *testing.T, r *rendered) *appsv1.Deployment {
	t.Helper()
	d := r.deployment(t)
	mustf(t, container(d, "envoy") == nil, "envoy container still present")
	checkSecurityContext(t, r, d)
	checkAPIToken(t, r, d)
	checkRBAC(t, r, d)
	checkContainerFlags(t, d)
	var guarded bool
	for _, u := range r.all("NetworkPolicy") {
		np := into[networkingv1.NetworkPolicy](t, u)
		if !selects(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) {
			continue
		}
		guarded = true
		for _, rule := range np.Spec.Ingress {
			if hasPort(rule.Ports, corev1.ProtocolTCP, 8081) || hasPort(rule.Ports, corev1.ProtocolTCP, 9001) {
				mustf(t, len(rule.From) > 0, "bridge/extauthz ports open to every source")
			}
		}
	}
	mustf(t, guarded, "no NetworkPolicy guards the bridge's identity-trusting port")
	return d
}

func checkIngressNginx(t *testing.T, r *rendered) {
	d := checkWithoutEnvoy(t, r)
	ing := into[networkingv1.Ingress](t, r.one(t, "Ingress", ""))
	a := ing.Annotations
	hl, _ := flagValue(container(d, "extauthz").Args, "http-listen")
	authz := into[corev1.Service](t, r.one(t, "Service", "wirekube-relay-gateway-authz"))
	url := a["nginx.ingress.kubernetes.io/auth-url"]
	mustf(t, strings.HasPrefix(url, "http://"+authz.Name+"."+namespace+".svc") && strings.Contains(url, ":9002/") &&
		strings.HasSuffix(hl, ":9002"), "auth-url %q must reach extauthz --http-listen=%s via Service %s", url, hl, authz.Name)
	// The identity headers, and the deny reason (never in an allow answer:
	// listing it clears a client's copy without a snippet).
	want := strings.Join(append(append([]string(nil), contract.IdentityHeaders...), contract.HeaderDenyReason), ",")
	mustf(t, a["nginx.ingress.kubernetes.io/auth-response-headers"] == want,
		"auth-response-headers %q, want %v", a["nginx.ingress.kubernetes.io/auth-response-headers"], want)
	rt, _ := strconv.Atoi(a["nginx.ingress.kubernetes.io/proxy-read-timeout"])
	mustf(t, rt >= 4*agentKeepaliveSeconds, "proxy-read-timeout %d too short for the keepalive", rt)
	checkRelayPath(t, ing, "http")
}

func checkIstio(t *testing.T, r *rendered) {
	checkWithoutEnvoy(t, r)
	ap := r.one(t, "AuthorizationPolicy", "")
	mustf(t, str(ap.Object, "spec", "action") == "CUSTOM" && str(ap.Object, "spec", "provider", "name") == "wirekube-extauthz",
		"AuthorizationPolicy must be CUSTOM with provider wirekube-extauthz")
	rules, _, _ := unstructured.NestedSlice(ap.Object, "spec", "rules")
	mustf(t, len(rules) == 1, "want one rule checking every bridge path but the health endpoints")
}

func checkEnvoyGateway(t *testing.T, r *rendered) {
	checkWithoutEnvoy(t, r)
	sp := r.one(t, "SecurityPolicy", "")
	fail, found, _ := unstructured.NestedBool(sp.Object, "spec", "extAuth", "failOpen")
	mustf(t, found && !fail, "SecurityPolicy extAuth.failOpen must be false")
	refs, _, _ := unstructured.NestedSlice(sp.Object, "spec", "extAuth", "grpc", "backendRefs")
	ok := len(refs) == 1 && str(refs[0].(map[string]any), "name") == "wirekube-relay-gateway-authz"
	mustf(t, ok, "SecurityPolicy must call extauthz over gRPC: %v", refs)
	checkHTTPRoute(t, r.one(t, "HTTPRoute", ""), "wirekube-relay-gateway", 8081)
}

func checkAgentToken(t *testing.T, r *rendered) {
	ds := into[appsv1.DaemonSet](t, r.one(t, "DaemonSet", "wirekube-agent"))
	dir, file := filepath.Split(contract.AgentTokenPath)
	var vol string
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if tok := s.ServiceAccountToken; tok != nil && tok.Audience == contract.DefaultAudience && tok.Path == file &&
				tok.ExpirationSeconds != nil && *tok.ExpirationSeconds <= 3600 {
				vol = v.Name
			}
		}
	}
	mustf(t, vol != "", "no projected token with audience %s, path %s, at most 1h", contract.DefaultAudience, file)
	agent := container(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: ds.Spec.Template}}, "agent")
	ok := agent != nil && slices.ContainsFunc(agent.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == vol && filepath.Clean(m.MountPath) == filepath.Clean(dir) && m.ReadOnly
	})
	mustf(t, ok, "the agent does not mount the token read-only at %s", dir)
}

func checkMesh(t *testing.T, r *rendered, provider string) {
	m := r.one(t, "WireKubeMesh", "")
	mustf(t, str(m.Object, "spec", "relay", "provider") == provider, "provider %q", str(m.Object, "spec", "relay", "provider"))
	mustf(t, str(m.Object, "spec", "relay", provider, "transport") == "wss", "transport is not wss")
	ep := str(m.Object, "spec", "relay", provider, "controlEndpoint")
	mustf(t, strings.HasPrefix(ep, "wss://") && strings.HasSuffix(ep, contract.DefaultRelayPath), "controlEndpoint %q", ep)
	mustf(t, str(m.Object, "spec", "meshCIDR") != "", "no spec.meshCIDR: applied over the chart's mesh it would remove the mesh's addresses")
}

func checkPeerServiceAccount(t *testing.T, r *rendered) {
	sa := into[corev1.ServiceAccount](t, r.one(t, "ServiceAccount", ""))
	peer, ok := strings.CutPrefix(sa.Name, "wirekube-relay-peer-")
	mustf(t, ok && peer != "" && sa.Namespace == namespace, "ServiceAccount %s/%s is not wirekube-system/wirekube-relay-peer-<peer>", sa.Namespace, sa.Name)
	mustf(t, sa.AutomountServiceAccountToken != nil && !*sa.AutomountServiceAccountToken, "automountServiceAccountToken must be false")
}

func checkPodMonitor(t *testing.T, r *rendered) {
	pm := r.one(t, "PodMonitor", "")
	base := renderDir(t, "base").deployment(t)
	ports := map[string]bool{}
	for _, c := range base.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	mustf(t, len(eps) == 3, "want envoy, bridge and extauthz endpoints, got %d", len(eps))
	for _, e := range eps {
		p := str(e.(map[string]any), "port")
		mustf(t, ports[p], "PodMonitor port %q is not a port of the gateway Pod", p)
	}
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	mustf(t, selects(sel, base.Spec.Template.Labels), "PodMonitor does not select the gateway Pods")
}
