package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Flag definitions in the binaries' source: fs.StringVar(&o.X, "name", ...),
// fs.Var(value, "name", ...), fs.String("name", ...).
var (
	flagVarRE = regexp.MustCompile(`\.(?:[A-Z][A-Za-z0-9]*)?Var\([^"]*?,\s*"([a-z][a-z0-9-]*)"`)
	flagRE    = regexp.MustCompile(`\.(?:String|Duration|Int|Int64|Uint|Uint64|Bool|Float64|Func|TextVar)\(\s*"([a-z][a-z0-9-]*)"`)
)

// definedFlags collects the flag names defined in the non-test Go files under
// dir (relative to the repository root). The manifests and the compose file
// must only use these: a renamed flag fails here, not at a user's rollout.
func definedFlags(t *testing.T, dir string) map[string]bool {
	t.Helper()
	root := filepath.Join("..", dir)
	flags := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, re := range []*regexp.Regexp{flagVarRE, flagRE} {
			for _, m := range re.FindAllSubmatch(src, -1) {
				flags[string(m[1])] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", root, err)
	}
	if len(flags) == 0 {
		t.Fatalf("no flag definitions found under %s", root)
	}
	return flags
}

// checkFlags fails for every --name in args that dir's binaries do not define.
func checkFlags(t *testing.T, where string, args []string, defined map[string]bool) {
	t.Helper()
	for _, a := range args {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		mustf(t, defined[name], "%s: flag --%s is not defined by the binary", where, name)
	}
}

func TestFlagScanner(t *testing.T) {
	src := []byte(`fs.StringVar(&o.Listen, "listen", "127.0.0.1:8081", "x")
	fs.Var(newListFlag(&o.AgentServiceAccounts), "agent-service-account", "y")
	fs.DurationVar(&o.CheckTimeout,
		"check-timeout", 2*time.Second, "z")
	flag.String("kubeconfig", "", "k")`)
	got := map[string]bool{}
	for _, re := range []*regexp.Regexp{flagVarRE, flagRE} {
		for _, m := range re.FindAllSubmatch(src, -1) {
			got[string(m[1])] = true
		}
	}
	for _, want := range []string{"listen", "agent-service-account", "check-timeout", "kubeconfig"} {
		mustf(t, got[want], "scanner missed %q (got %v)", want, got)
	}
}
