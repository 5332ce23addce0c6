package scale

import (
	"context"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"sigs.k8s.io/yaml"
)

// lines is a generator's stdin as the test reads it.
type lines struct{ strings.Builder }

func (*lines) Close() error { return nil }

// TestEndpointsFollowReadiness: a replica leaves the Service after three
// failed probes in a row (not two, not three with a success between) and
// a second later for its clients; one success puts it back; once
// terminated no probe puts it back.
func TestEndpointsFollowReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var in lines
		e := newEndpoints()
		e.setGens([]*generator{{stdin: &in}})
		ctx := context.Background()
		logf := func(string, ...any) {}
		for _, ok := range []bool{false, false, true, false, false} {
			if err := e.observe(ctx, 1, ok, logf); err != nil {
				t.Fatal(err)
			}
		}
		if in.Len() != 0 {
			t.Fatalf("told %q after two failures in a row, want nothing", in.String())
		}
		start := time.Now()
		if err := e.observe(ctx, 1, false, logf); err != nil {
			t.Fatal(err)
		}
		if got, waited := in.String(), time.Since(start); got != "gone 1\n" || waited != time.Second {
			t.Fatalf("after the third failure: told %q after %s, want \"gone 1\\n\" after 1s", got, waited)
		}
		time.Sleep(9 * time.Second)
		must(t, e.observe(ctx, 1, true, logf))
		if got := in.String(); got != "gone 1\nback 1\n" {
			t.Fatalf("after a success: told %q, want gone then back", got)
		}
		if n, out := e.full(); n != 1 || out != 10*time.Second {
			t.Errorf("full() = %d, %s; want 1 removal, 10s out", n, out)
		}
		must(t, e.terminate(1))
		must(t, e.observe(ctx, 1, true, logf))
		if got := in.String(); got != "gone 1\nback 1\ngone 1\n" {
			t.Errorf("terminated: told %q, want a last gone and no back", got)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDefaultUnreadyAtIsTheCharts: the bench runs its bridges at the
// chart's bridge.unreadyAt.
func TestDefaultUnreadyAtIsTheCharts(t *testing.T) {
	b, err := os.ReadFile("../../charts/wirekube-relay-ws/values.yaml")
	must(t, err)
	var v struct {
		Bridge struct {
			UnreadyAt int `json:"unreadyAt"`
		} `json:"bridge"`
	}
	must(t, yaml.Unmarshal(b, &v))
	if v.Bridge.UnreadyAt != DefaultUnreadyAt {
		t.Errorf("chart bridge.unreadyAt %d, bench DefaultUnreadyAt %d", v.Bridge.UnreadyAt, DefaultUnreadyAt)
	}
}
