package manifests

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/wirekube/relay-ws/internal/test/render"
)

// revocationDir is where the revocation socket and secret live: the
// emptyDir only extauthz and the bridge mount (docs/revocation.md).
const revocationDir = "/run/wirekube-revocation"

// TestRevocationSocketShapes: in every shape that runs the gateway Pod, the
// bridge reaches extauthz's revocation listener on a Unix socket in the
// shared emptyDir, reads the secret extauthz writes there, and nothing but
// those two containers mounts it; extauthz watches as many bindings as the
// bridge may hold sessions.
func TestRevocationSocketShapes(t *testing.T) {
	shapes := map[string]func(t *testing.T) *rendered{
		"base":                   func(t *testing.T) *rendered { return renderDir(t, "base") },
		"examples/ingress-nginx": func(t *testing.T) *rendered { return renderDir(t, "examples/ingress-nginx") },
		"chart":                  func(t *testing.T) *rendered { return renderChart(t) },
		"chart front=none":       func(t *testing.T) *rendered { return renderChart(t, chartValueSets["front-none"]...) },
		"chart plaintext":        func(t *testing.T) *rendered { return renderChart(t, chartValueSets["plaintext"]...) },
	}
	for name, render := range shapes {
		t.Run(name, func(t *testing.T) { checkRevocationSocket(t, render(t).deployment(t)) })
	}
}

func checkRevocationSocket(t *testing.T, d *appsv1.Deployment) {
	x, b := container(d, "extauthz"), container(d, "bridge")
	listen, _ := flagValue(x.Args, "revocation-listen")
	addr, _ := flagValue(b.Args, "revocation-addr")
	mustf(t, listen == addr && strings.HasPrefix(addr, "unix:"+revocationDir+"/"),
		"bridge --revocation-addr=%q, extauthz --revocation-listen=%q: want the same unix socket under %s", addr, listen, revocationDir)
	xs, _ := flagValue(x.Args, "revocation-secret-file")
	bs, _ := flagValue(b.Args, "revocation-secret-file")
	mustf(t, xs == bs && strings.HasPrefix(xs, revocationDir+"/"), "secret files %q (extauthz), %q (bridge): want one file under %s", xs, bs, revocationDir)
	grpcListen, _ := flagValue(x.Args, "grpc-listen")
	mustf(t, grpcListen != listen, "the revocation stream must not share the ext_authz listener %q", grpcListen)
	maxBindings, _ := flagValue(x.Args, "revocation-max-bindings")
	maxSessions, _ := flagValue(b.Args, "max-sessions")
	mustf(t, maxBindings != "" && maxBindings == maxSessions, "extauthz --revocation-max-bindings=%q, bridge --max-sessions=%q: want them equal", maxBindings, maxSessions)
	var vol string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.EmptyDir != nil {
			for _, c := range []string{"extauthz", "bridge"} {
				for _, m := range container(d, c).VolumeMounts {
					if m.Name == v.Name && m.MountPath == revocationDir {
						vol = v.Name
					}
				}
			}
		}
	}
	mustf(t, vol != "", "no emptyDir mounted at %s", revocationDir)
	for _, c := range d.Spec.Template.Spec.Containers {
		mounted := false
		for _, m := range c.VolumeMounts {
			mounted = mounted || m.Name == vol
			if m.Name == vol {
				mustf(t, m.MountPath == revocationDir, "%s mounts %s at %s", c.Name, vol, m.MountPath)
			}
		}
		want := c.Name == "extauthz" || c.Name == "bridge"
		mustf(t, mounted == want, "container %s mounts the revocation emptyDir: %v, want %v", c.Name, mounted, want)
	}
}

// TestChartRevocationOffInBoth: bridge.revocationAddr="" renders the flags empty
// in both containers (an omitted flag would keep the binaries' default,
// which is on); the shared volume stays, mounted by both: the identity
// signing keys extauthz publishes for the bridge live there.
func TestChartRevocationOffInBoth(t *testing.T) {
	d := renderChart(t, "--set", "bridge.revocationAddr=").deployment(t)
	for _, f := range []struct{ c, flag string }{{"bridge", "revocation-addr"}, {"extauthz", "revocation-listen"}} {
		v, set := flagValue(container(d, f.c).Args, f.flag)
		mustf(t, set && v == "", "%s --%s=%q (set %v): want it rendered empty", f.c, f.flag, v, set)
	}
	for _, c := range []string{"bridge", "extauthz"} {
		mounted := slices.ContainsFunc(container(d, c).VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == "revocation" })
		v, _ := flagValue(container(d, c).Args, "identity-keys-file")
		mustf(t, mounted && v == "/run/wirekube-revocation/identity-keys",
			"%s with revocation off: mounts the shared volume %v, --identity-keys-file=%q", c, mounted, v)
	}
}

// TestChartRevocationAddrStaysInPod: the schema refuses a revocationAddr
// that would leave the Pod or miss the shared emptyDir.
func TestChartRevocationAddrStaysInPod(t *testing.T) {
	for _, v := range []string{"10.0.0.7:9004", "0.0.0.0:9004", "unix:/tmp/revocation.sock"} {
		if _, err := render.HelmTemplate(t.Context(), chartDir, namespace, "--set", "bridge.revocationAddr="+v); err == nil {
			t.Errorf("bridge.revocationAddr=%s rendered, want the schema to refuse it", v)
		}
	}
}
