package manifests

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

func checkTLSMount(t *testing.T, r *rendered, d *appsv1.Deployment) {
	for _, f := range tlsFiles(t, r, d, envoyConfig(t, r, d)) {
		dir := filepath.Dir(f)
		e := container(d, "envoy")
		i := slices.IndexFunc(e.VolumeMounts, func(m corev1.VolumeMount) bool { return filepath.Clean(m.MountPath) == dir })
		if i < 0 {
			t.Errorf("envoy reads %s but nothing is mounted at %s", f, dir)
			continue
		}
		v := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == e.VolumeMounts[i].Name && v.Secret != nil
		})
		if v < 0 {
			t.Errorf("%s is not mounted from a Secret", dir)
			continue
		}
		// Group-readable only (fsGroup gives the group); YAML octal must not
		// have turned into a decimal mode.
		mode := d.Spec.Template.Spec.Volumes[v].Secret.DefaultMode
		mustf(t, mode != nil && *mode&0o007 == 0 && *mode&0o040 != 0, "TLS Secret defaultMode %v, want 0440 (no access for others)", mode)
		mustf(t, strings.HasSuffix(f, "tls.crt") || strings.HasSuffix(f, "tls.key"), "%s: want the kubernetes.io/tls keys", f)
	}
}

// tlsFiles returns the certificate files the Envoy container reads: inline,
// or through file-based SDS, whose resource file must itself be a key of a
// ConfigMap mounted where the config looks for it.
func tlsFiles(t *testing.T, r *rendered, d *appsv1.Deployment, b *bootstrapv3.Bootstrap) []string {
	t.Helper()
	var files []string
	for _, l := range b.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			ts := fc.GetTransportSocket()
			if ts == nil {
				continue
			}
			tc := &tlsv3.DownstreamTlsContext{}
			if err := ts.GetTypedConfig().UnmarshalTo(tc); err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.GetCommonTlsContext().GetTlsCertificates() {
				files = append(files, c.GetCertificateChain().GetFilename(), c.GetPrivateKey().GetFilename())
			}
			for _, sc := range tc.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs() {
				files = append(files, sdsFiles(t, r, d, sc.GetSdsConfig().GetPathConfigSource().GetPath(), sc.GetName())...)
			}
		}
	}
	if len(files) == 0 {
		t.Fatal("the base Envoy config has no TLS certificate files")
	}
	return files
}

func sdsFiles(t *testing.T, r *rendered, d *appsv1.Deployment, path, name string) []string {
	t.Helper()
	e := container(d, "envoy")
	dir, key := filepath.Split(path)
	i := slices.IndexFunc(e.VolumeMounts, func(m corev1.VolumeMount) bool { return filepath.Clean(m.MountPath) == filepath.Clean(dir) })
	if i < 0 {
		t.Fatalf("SDS file %s: nothing mounted at %s", path, dir)
	}
	var cmName string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == e.VolumeMounts[i].Name && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	cm := into[corev1.ConfigMap](t, r.one(t, "ConfigMap", cmName))
	secrets, err := envoyconfig.DecodeSDS([]byte(cm.Data[key]))
	if err != nil || len(secrets) == 0 {
		t.Fatalf("SDS file %s (ConfigMap %s key %s): %d secrets, %v", path, cmName, key, len(secrets), err)
	}
	for _, s := range secrets {
		if s.GetName() == name {
			c := s.GetTlsCertificate()
			return []string{c.GetCertificateChain().GetFilename(), c.GetPrivateKey().GetFilename()}
		}
	}
	t.Fatalf("SDS file %s has no secret %q", path, name)
	return nil
}

func checkService(t *testing.T, r *rendered, d *appsv1.Deployment) {
	s := into[corev1.Service](t, r.one(t, "Service", "wirekube-relay-gateway"))
	mustf(t, selects(s.Spec.Selector, d.Spec.Template.Labels), "Service does not select the gateway Pods")
	mustf(t, len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Port == 443 && s.Spec.Ports[0].TargetPort.String() == "https",
		"Service ports %v, want only 443 -> https", s.Spec.Ports)
}

func checkBinaryFlags(t *testing.T, _ *rendered, d *appsv1.Deployment) {
	checkContainerFlags(t, d)
}

// checkContainerFlags checks every flag the extauthz and bridge containers use.
func checkContainerFlags(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	for _, c := range []struct{ name, src, bin string }{
		{"extauthz", "extauthz", "/usr/local/bin/wirekube-extauthz"},
		{"bridge", "bridge", "/usr/local/bin/wirekube-bridge"},
	} {
		ct := container(d, c.name)
		if ct == nil {
			t.Errorf("no %s container", c.name)
			continue
		}
		mustf(t, slices.Equal(ct.Command, []string{c.bin}), "%s command %v, want [%s]", c.name, ct.Command, c.bin)
		checkFlags(t, c.name, ct.Args, definedFlags(t, c.src))
	}
}

// nodesUsed reports whether extauthz's code reads Nodes, which decides
// whether the RBAC may (and must) grant them.
func nodesUsed(t *testing.T) bool {
	t.Helper()
	files, err := filepath.Glob("../extauthz/*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no extauthz sources: %v", err)
	}
	re := regexp.MustCompile(`\.Nodes\(\)`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if re.Match(src) {
			return true
		}
	}
	return false
}

type grant struct{ group, resource, verbs string }

func checkRBAC(t *testing.T, r *rendered, d *appsv1.Deployment) {
	wantCluster := []grant{
		{"authentication.k8s.io", "tokenreviews", "create"},
		{"wirekube.io", "wirekubepeers", "get,list,watch"},
		// Whether the WireKubePeer admission policy is in force (read only;
		// extauthz lists the two objects by name).
		{"admissionregistration.k8s.io", "validatingadmissionpolicies", "get,list,watch"},
		{"admissionregistration.k8s.io", "validatingadmissionpolicybindings", "get,list,watch"},
	}
	if nodesUsed(t) {
		wantCluster = append(wantCluster, grant{"", "nodes", "get,list,watch"})
	}
	// Where the WireKubeMesh sends the agents (--mesh-watch, read only),
	// and nothing on the meshes with the watch off.
	if meshWatchOn(d) {
		wantCluster = append(wantCluster, grant{"wirekube.io", "wirekubemeshes", "get,list,watch"})
	}
	// Per namespace. Events about cluster-scoped objects (WireKubePeers)
	// are accepted by kube-apiserver only in namespace default: the one
	// grant outside the gateway's namespace, and only to write Events.
	wantNS := map[string][]grant{
		namespace: {{"", "pods", "get,list,watch"}, {"", "serviceaccounts", "get,list,watch"}},
		"default": {{"", "events", "create,patch"}},
	}
	if !peerEventsOn(d) {
		delete(wantNS, "default")
	}
	sa := d.Spec.Template.Spec.ServiceAccountName
	mustf(t, sa != "" && sa != "default", "the Pod must run as its own ServiceAccount, not %q", sa)
	r.one(t, "ServiceAccount", sa)
	var gotCluster []grant
	gotNS := map[string][]grant{}
	for _, u := range r.all("ClusterRole") {
		gotCluster = append(gotCluster, grants(t, into[rbacv1.ClusterRole](t, u).Rules)...)
	}
	for _, u := range r.all("Role") {
		gotNS[u.GetNamespace()] = append(gotNS[u.GetNamespace()], grants(t, into[rbacv1.Role](t, u).Rules)...)
	}
	sortGrants(wantCluster, gotCluster)
	mustf(t, slices.Equal(gotCluster, wantCluster), "cluster-wide grants %v, want exactly %v", gotCluster, wantCluster)
	mustf(t, len(gotNS) == len(wantNS), "Roles in namespaces %v, want %v", gotNS, wantNS)
	for ns, want := range wantNS {
		sortGrants(want, gotNS[ns])
		mustf(t, slices.Equal(gotNS[ns], want), "grants in namespace %q %v, want exactly %v", ns, gotNS[ns], want)
	}
	checkBindings(t, r, sa)
}

// grants flattens rules to one (group, resource, verbs) per resource and
// fails on wildcards, resourceNames-free Secrets and non-resource URLs.
//
// No non-resource URL is needed: the issuer discovery documents extauthz
// verifies tokens with (/.well-known/openid-configuration, /openid/v1/jwks)
// are granted to every ServiceAccount by kube-apiserver's default
// ClusterRoleBinding system:service-account-issuer-discovery (group
// system:serviceaccounts); the e2e suite fetches both as the extauthz
// ServiceAccount of these manifests from a real kube-apiserver.
func grants(t *testing.T, rules []rbacv1.PolicyRule) []grant {
	t.Helper()
	var out []grant
	for _, rule := range rules {
		mustf(t, len(rule.NonResourceURLs) == 0, "non-resource URLs granted: %v (the discovery URLs need no rule: see above)", rule.NonResourceURLs)
		all := slices.Concat(rule.APIGroups, rule.Resources, rule.Verbs)
		mustf(t, !slices.Contains(all, "*"), "wildcard in rule %v", rule)
		v := slices.Clone(rule.Verbs)
		slices.Sort(v)
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				mustf(t, res != "secrets", "Secrets granted: extauthz must not read Secrets")
				out = append(out, grant{g, res, strings.Join(v, ",")})
			}
		}
	}
	return out
}

func sortGrants(lists ...[]grant) {
	for _, l := range lists {
		slices.SortFunc(l, func(a, b grant) int { return strings.Compare(a.group+"/"+a.resource, b.group+"/"+b.resource) })
	}
}

// checkBindings: one ClusterRoleBinding, and one RoleBinding per Role in
// the Role's namespace, each binding only the gateway's ServiceAccount.
func checkBindings(t *testing.T, r *rendered, sa string) {
	t.Helper()
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		bs := r.all(kind)
		roleKind := strings.TrimSuffix(kind, "Binding")
		want := 1
		if kind == "RoleBinding" {
			want = len(r.all("Role"))
		}
		mustf(t, len(bs) == want, "%d %s, want %d", len(bs), kind, want)
		for _, u := range bs {
			var subj []rbacv1.Subject
			var ref rbacv1.RoleRef
			if kind == "RoleBinding" {
				b := into[rbacv1.RoleBinding](t, u)
				subj, ref = b.Subjects, b.RoleRef
			} else {
				b := into[rbacv1.ClusterRoleBinding](t, u)
				subj, ref = b.Subjects, b.RoleRef
			}
			mustf(t, len(subj) == 1 && subj[0].Kind == "ServiceAccount" && subj[0].Name == sa && subj[0].Namespace == namespace,
				"%s %s subjects %v, want only ServiceAccount %s/%s", kind, u.GetName(), subj, namespace, sa)
			mustf(t, ref.Kind == roleKind, "%s %s binds a %s", kind, u.GetName(), ref.Kind)
			role := r.one(t, roleKind, ref.Name)
			mustf(t, role.GetNamespace() == u.GetNamespace(), "%s %s in %q binds %s %s in %q",
				kind, u.GetName(), u.GetNamespace(), roleKind, ref.Name, role.GetNamespace())
		}
	}
}

// peerEventsOn reports whether extauthz records Events (--peer-events,
// default true).
func peerEventsOn(d *appsv1.Deployment) bool {
	v, set := flagValue(container(d, "extauthz").Args, "peer-events")
	return !set || v == "true"
}

func meshWatchOn(d *appsv1.Deployment) bool {
	v, set := flagValue(container(d, "extauthz").Args, "mesh-watch")
	return !set || v == "true"
}

func hasPort(ports []networkingv1.NetworkPolicyPort, proto corev1.Protocol, port int) bool {
	return slices.ContainsFunc(ports, func(p networkingv1.NetworkPolicyPort) bool {
		return p.Protocol != nil && *p.Protocol == proto && p.Port != nil && p.Port.IntValue() == port
	})
}

func checkScrape(t *testing.T, _ *rendered, d *appsv1.Deployment) {
	a := d.Spec.Template.Annotations
	mustf(t, a["prometheus.io/scrape"] == "true", "no prometheus.io/scrape annotation")
	port := a["prometheus.io/port"]
	ok := false
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ok = ok || strconv.Itoa(int(p.ContainerPort)) == port
		}
	}
	mustf(t, ok, "prometheus.io/port %q is not a container port", port)
}

// checkDrain: the bridge waits its preStop sleep (the endpoint removed)
// and then drains for --drain-timeout; Envoy, which does not drain
// upgraded connections, sleeps at least that long, and the grace period
// outlasts Envoy's sleep.
func checkDrain(t *testing.T, _ *rendered, d *appsv1.Deployment) {
	drain, _ := flagValue(container(d, "bridge").Args, "drain-timeout")
	e, b := container(d, "envoy"), container(d, "bridge")
	if e.Lifecycle == nil || e.Lifecycle.PreStop == nil || e.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("envoy has no preStop sleep: Envoy does not drain WebSockets, the bridge does")
	}
	if b.Lifecycle == nil || b.Lifecycle.PreStop == nil || b.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("the bridge has no preStop sleep: SIGTERM would start the drain before the endpoint is gone")
	}
	mustf(t, e.Lifecycle.PreStop.Sleep.Seconds >= b.Lifecycle.PreStop.Sleep.Seconds+secs(t, drain),
		"envoy preStop %ds must outlast the bridge's preStop %ds plus --drain-timeout=%s",
		e.Lifecycle.PreStop.Sleep.Seconds, b.Lifecycle.PreStop.Sleep.Seconds, drain)
	g := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	mustf(t, g != nil, "no terminationGracePeriodSeconds")
	mustf(t, *g > e.Lifecycle.PreStop.Sleep.Seconds, "terminationGracePeriodSeconds %d must exceed the envoy preStop sleep %ds", *g, e.Lifecycle.PreStop.Sleep.Seconds)
}

// secs parses a Go duration flag value into whole seconds, rounded up.
func secs(t *testing.T, v string) int64 {
	t.Helper()
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("duration %q: %v", v, err)
	}
	return int64((d + time.Second - 1) / time.Second)
}
