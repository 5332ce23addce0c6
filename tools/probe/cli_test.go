package probe

import (
	"context"
	"io"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func TestVersionFlag(t *testing.T) {
	var out strings.Builder
	if err := Command(context.Background(), []string{"--version"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "wirekube-relay-probe dev (go") {
		t.Fatalf("stdout %q", out.String())
	}
}

// TestProbeYAML: -o yaml is the same report as JSON, parsed back here.
func TestProbeYAML(t *testing.T) {
	env := newTestEnv(t, true)
	code, out, _ := runProbe(t, env.args("-o", "yaml", "--count", "1")...)
	if code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	var res Result
	if err := yaml.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, out)
	}
	if !res.OK || res.Class != "ok" || len(res.Stages) != 6 || res.Stages[5].Name != "echo" || res.Stages[5].Status != StatusOK {
		t.Fatalf("parsed %+v from:\n%s", res, out)
	}
	if strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Errorf("-o yaml printed JSON:\n%s", out)
	}
}

// TestProbeLogLevel: --log-level=debug adds one stderr line per stage; the
// default (info) prints none; a bad level is a usage error naming the flag.
func TestProbeLogLevel(t *testing.T) {
	env := newTestEnv(t, false)
	_, _, errOut := runProbe(t, env.args("--count", "1", "--log-level", "debug")...)
	testutil.Contains(t, errOut, "level=DEBUG msg=stage name=tcp status=ok", "name=echo status=ok")
	if _, _, errOut := runProbe(t, env.args("--count", "1")...); strings.Contains(errOut, "msg=stage") {
		t.Errorf("info level printed stage lines:\n%s", errOut)
	}
	err := Command(context.Background(), env.args("--log-level", "loud"), io.Discard, io.Discard)
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad level: exit %d, %v", ExitCode(err), err)
	}
}
