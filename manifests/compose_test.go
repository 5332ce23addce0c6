package manifests

import (
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
	"github.com/wirekube/relay-ws/internal/version"
)

// composeFile is the part of docker-compose.yaml the checks read.
type composeFile struct {
	Services map[string]composeService `json:"services"`
	Volumes  map[string]any            `json:"volumes"`
}

type composeService struct {
	Image       string                       `json:"image"`
	Build       any                          `json:"build"`
	Command     []string                     `json:"command"`
	Entrypoint  []string                     `json:"entrypoint"`
	Ports       []string                     `json:"ports"`
	Volumes     []string                     `json:"volumes"`
	NetworkMode string                       `json:"network_mode"`
	DependsOn   map[string]map[string]string `json:"depends_on"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile("../docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	// Keys the checks do not read (privileged, tmpfs, ...) are ignored.
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	if len(c.Services) == 0 {
		t.Fatal("docker-compose.yaml has no services")
	}
	return c
}

// mount is one volumes entry: a host path (./...) or a named volume.
type mount struct{ src, dst string }

func (s composeService) mounts() []mount {
	var out []mount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			out = append(out, mount{parts[0], parts[1]})
		}
	}
	return out
}

// hostPath maps a path inside the container to the host (repository) path or
// named volume that backs it: ("", "vol", rest) or ("./file", "", rest).
func (s composeService) resolve(p string) (host, volume string) {
	for _, m := range s.mounts() {
		if p == m.dst || strings.HasPrefix(p, strings.TrimSuffix(m.dst, "/")+"/") {
			rest := strings.TrimPrefix(p, m.dst)
			if strings.HasPrefix(m.src, "./") {
				return path.Join(m.src, rest), ""
			}
			return "", m.src
		}
	}
	return "", ""
}

func TestCompose(t *testing.T) {
	c := loadCompose(t)
	for _, tc := range []struct {
		name  string
		check func(t *testing.T, c composeFile)
	}{
		{"mounted_files_exist", checkComposeMounts},
		{"images_pinned", checkComposeImages},
		{"only_envoy_publishes", checkComposePorts},
		{"addresses_match_envoy_config", checkComposeAddresses},
		{"binary_flags_exist", checkComposeFlags},
		{"probe_path", checkComposeProbe},
		{"bootstrap_files_exist", checkBootstrapPaths},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, c) })
	}
}

func checkComposeMounts(t *testing.T, c composeFile) {
	for name, s := range c.Services {
		for _, m := range s.mounts() {
			if strings.HasPrefix(m.src, "./") {
				_, err := os.Stat(filepath.Join("..", m.src))
				mustf(t, err == nil, "%s mounts %s: %v", name, m.src, err)
				continue
			}
			_, declared := c.Volumes[m.src]
			mustf(t, declared, "%s mounts undeclared volume %q", name, m.src)
		}
	}
}

var pinnedImages = map[string]*regexp.Regexp{
	"envoyproxy/envoy":  regexp.MustCompile(`^v1\.37\.\d+$`),
	"rancher/k3s":       regexp.MustCompile(`^v1\.3\d\.\d+-k3s\d+$`),
	"inerplat/wirekube": regexp.MustCompile(`^v0\.0\.17$`),
	"golang":            regexp.MustCompile(`^1\.26\.\d+-bookworm$`),
}

func checkComposeImages(t *testing.T, c composeFile) {
	for name, s := range c.Services {
		repo, tag, ok := strings.Cut(s.Image, ":")
		if !ok || tag == "" || tag == "latest" {
			t.Errorf("%s: image %q is not pinned to a version", name, s.Image)
			continue
		}
		if s.Build != nil {
			mustf(t, repo == version.Image, "%s builds this tree but tags it %q, want %s:<version>", name, s.Image, version.Image)
			continue
		}
		re := pinnedImages[repo]
		mustf(t, re != nil && re.MatchString(tag), "%s: image %q is not one of the pinned images", name, s.Image)
	}
	relay := c.Services["relay"]
	mustf(t, relay.Image == "inerplat/wirekube:v0.0.17" && len(relay.Command) > 0 && relay.Command[0] == "wirekube-relay",
		"relay must be the upstream image with command wirekube-relay, got %q %v", relay.Image, relay.Command)
}

func checkComposePorts(t *testing.T, c composeFile) {
	for name, s := range c.Services {
		mustf(t, name == "envoy" || len(s.Ports) == 0, "%s publishes %v: only Envoy may", name, s.Ports)
	}
	b, err := envoyconfig.Load("../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var relayPort string
	for _, l := range b.GetStaticResources().GetListeners() {
		if strings.HasPrefix(l.GetName(), "relay_") {
			relayPort = strconv.Itoa(int(l.GetAddress().GetSocketAddress().GetPortValue()))
		}
	}
	e := c.Services["envoy"]
	ok := len(e.Ports) == 1 && strings.HasSuffix(e.Ports[0], ":"+relayPort)
	mustf(t, ok, "envoy publishes %v, want only the relay listener port %s", e.Ports, relayPort)
	cfg := e.Command[slices.Index(e.Command, "--config-path")+1]
	host, _ := e.resolve(cfg)
	mustf(t, host == "envoy/envoy.yaml", "envoy runs %s, backed by %q, want ./envoy/envoy.yaml", cfg, host)
	sds, _ := e.resolve(envoyconfig.SDSConfigMountPath)
	mustf(t, sds == "envoy/"+envoyconfig.SDSConfig, "envoy's SDS file %s is backed by %q, want ./envoy/%s", envoyconfig.SDSConfigMountPath, sds, envoyconfig.SDSConfig)
}

func checkComposeAddresses(t *testing.T, c composeFile) {
	b, err := envoyconfig.Load("../envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	eps := clusterEndpoints(b)
	ga, _ := flagValue(c.Services["extauthz"].Command, "grpc-listen")
	la, _ := flagValue(c.Services["bridge"].Command, "listen")
	mustf(t, ga == eps["extauthz"], "extauthz --grpc-listen=%s, envoy expects %s", ga, eps["extauthz"])
	mustf(t, la == eps["bridge"], "bridge --listen=%s, envoy expects %s", la, eps["bridge"])
	for _, n := range []string{"extauthz", "bridge"} {
		mustf(t, c.Services[n].NetworkMode == "service:envoy", "%s must share Envoy's network namespace (loopback, as in the Pod)", n)
	}
	ra, _ := flagValue(c.Services["bridge"].Command, "relay-addr")
	host, port, err := net.SplitHostPort(ra)
	mustf(t, err == nil && c.Services[host].Image != "", "bridge --relay-addr=%s is not a compose service", ra)
	addr, _ := flagValue(c.Services["relay"].Command, "addr")
	mustf(t, strings.HasSuffix(addr, ":"+port), "relay listens on %q, bridge dials port %s", addr, port)
	ka, _ := flagValue(c.Services["extauthz"].Command, "kubeconfig")
	_, vol := c.Services["extauthz"].resolve(ka)
	_, bvol := c.Services["bootstrap"].resolve(ka)
	mustf(t, vol != "" && vol == bvol, "extauthz --kubeconfig=%s is not in a volume bootstrap writes", ka)
}

func checkComposeFlags(t *testing.T, c composeFile) {
	for _, s := range []struct{ svc, src, bin string }{
		{"extauthz", "extauthz", "/usr/local/bin/wirekube-extauthz"},
		{"bridge", "bridge", "/usr/local/bin/wirekube-bridge"},
		{"probe", "tools", "/usr/local/bin/wirekube-relay-probe"},
	} {
		cmd := c.Services[s.svc].Command
		if len(cmd) == 0 || cmd[0] != s.bin {
			t.Errorf("%s command %v, want %s first", s.svc, cmd, s.bin)
			continue
		}
		checkFlags(t, s.svc, cmd[1:], definedFlags(t, s.src))
	}
}

func checkComposeProbe(t *testing.T, c composeFile) {
	p := c.Services["probe"]
	raw, _ := flagValue(p.Command, "url")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	mustf(t, u.Scheme == "wss" && u.Hostname() == "envoy" && u.Path == contract.DefaultRelayPath && strings.HasSuffix(c.Services["envoy"].Ports[0], ":"+u.Port()),
		"probe --url=%s must reach Envoy's published TLS listener", raw)
	tf, _ := flagValue(p.Command, "token-file")
	_, vol := p.resolve(tf)
	_, bvol := c.Services["bootstrap"].resolve(tf)
	mustf(t, vol != "" && vol == bvol, "probe --token-file=%s is not in a volume bootstrap writes", tf)
	ca, _ := flagValue(p.Command, "ca-file")
	_, cvol := p.resolve(ca)
	_, evol := c.Services["envoy"].resolve("/etc/envoy/tls/tls.crt")
	mustf(t, cvol != "" && cvol == evol, "probe --ca-file=%s is not Envoy's certificate", ca)
	data, err := os.ReadFile("../deploy/compose/peer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var peer struct {
		Spec struct {
			PublicKey string `json:"publicKey"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &peer); err != nil {
		t.Fatal(err)
	}
	key, _ := flagValue(p.Command, "public-key")
	mustf(t, key != "" && key == peer.Spec.PublicKey, "probe --public-key %q differs from the demo peer's key %q", key, peer.Spec.PublicKey)
}

// checkBootstrapPaths: every file the one-shot scripts read from a mount
// exists in the repository.
func checkBootstrapPaths(t *testing.T, c composeFile) {
	re := regexp.MustCompile(`(/(?:crds|base|deploy)/[\w./-]+\.(?:yaml|sh))`)
	for _, svc := range []string{"bootstrap", "certs"} {
		s := c.Services[svc]
		script := s.Entrypoint[len(s.Entrypoint)-1]
		host, _ := s.resolve(script)
		src, err := os.ReadFile(filepath.Join("..", host))
		if err != nil {
			t.Fatalf("%s runs %s: %v", svc, script, err)
		}
		found := re.FindAllStringSubmatch(string(src), -1)
		mustf(t, svc != "bootstrap" || len(found) >= 4, "bootstrap reads %d mounted files, want the CRD, RBAC, ServiceAccount and peer", len(found))
		for _, m := range found {
			h, _ := s.resolve(m[1])
			_, err := os.Stat(filepath.Join("..", h))
			mustf(t, h != "" && err == nil, "%s reads %s (host %q): %v", svc, m[1], h, err)
		}
	}
}
