package recovery

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRecoverySmall runs both scenarios with a few agents, so the
// benchmark's code runs in every unit test run. It asserts only that every
// pair exchanges frames again and that no upgrade was a false connect.
func TestRecoverySmall(t *testing.T) {
	cfg := Config{Agents: 8, Interval: 100 * time.Millisecond, Outage: 500 * time.Millisecond, Drain: 400 * time.Millisecond, Settle: 30 * time.Second}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	res.Print(&sb)
	t.Log("\n" + sb.String())
	for name, d := range map[string]Downtimes{"relay restart": res.RelayRestart, "bridge drain": res.BridgeDrain} {
		if d.FalseConnects != 0 {
			t.Errorf("%s: %d false connects", name, d.FalseConnects)
		}
	}
	if res.RelayRestart.Affected == 0 {
		t.Error("the relay restart cut no agent: the scenario did nothing")
	}
}

// TestOneReplicaHoldRefusesNoDial: a single replica drained with
// --drain-peers while its replacement starts keeps every session until the
// replacement is ready, so no agent's redial finds nothing (no refused
// dial), and every pair exchanges frames again.
func TestOneReplicaHoldRefusesNoDial(t *testing.T) {
	cfg := Config{Agents: 8, Interval: 100 * time.Millisecond, Drain: 4 * time.Second, Settle: 30 * time.Second}
	res, err := RunOneReplica(context.Background(), cfg, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	res.Print(&sb)
	t.Log("\n" + sb.String())
	if res.Hold.Refused != 0 || res.Hold.FalseConnects != 0 {
		t.Errorf("--drain-peers: %d refused dials, %d false connects, want none", res.Hold.Refused, res.Hold.FalseConnects)
	}
	if res.Hold.Affected == 0 {
		t.Error("the drain cut no agent: the scenario did nothing")
	}
}

// BenchmarkOneReplica prints the data-path downtime of 1,000 agents when
// the only bridge is replaced, the replacement ready 3 s after SIGTERM,
// with --drain-timeout 10 s, in both drain orders (figures, not
// assertions). It runs once whatever b.N is.
func BenchmarkOneReplica(b *testing.B) {
	if b.N > 1 {
		b.Skip("runs once")
	}
	cfg := DefaultConfig()
	cfg.Drain = 10 * time.Second
	res, err := RunOneReplica(context.Background(), cfg, 3*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	res.Print(os.Stdout)
	b.ReportMetric(res.Spread.P99.Seconds(), "spread-p99-s")
	b.ReportMetric(res.Hold.P99.Seconds(), "hold-p99-s")
	b.ReportMetric(float64(res.Spread.Refused), "spread-refused")
	b.ReportMetric(float64(res.Hold.Refused), "hold-refused")
}

// BenchmarkRecovery prints the downtimes of DefaultConfig's 1,000 agents
// (figures, not assertions). It runs once whatever b.N is.
func BenchmarkRecovery(b *testing.B) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if b.N > 1 {
		b.Skip("runs once")
	}
	res, err := Run(context.Background(), DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	res.Print(os.Stdout)
	b.ReportMetric(res.RelayRestart.P99.Seconds(), "relay-restart-p99-s")
	b.ReportMetric(res.BridgeDrain.P99.Seconds(), "bridge-drain-p99-s")
}

// BenchmarkRelayOutages prints the data-path downtime of 3, 15 and 40 s
// relay outages with 100 agents and the bridge's default --relay-wait
// (each should cost at most the outage + 1 s). Figures,
// not assertions; it runs once whatever b.N is.
func BenchmarkRelayOutages(b *testing.B) {
	if b.N > 1 {
		b.Skip("runs once")
	}
	cfg := DefaultConfig()
	cfg.Agents = 100
	rows, err := RunOutages(context.Background(), cfg, []time.Duration{3 * time.Second, 15 * time.Second, 40 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	PrintOutages(os.Stdout, cfg.Agents, rows)
	for _, r := range rows {
		b.ReportMetric((r.Down.Max - r.Outage).Seconds(), fmt.Sprintf("beyond-%ds-max-s", int(r.Outage.Seconds())))
	}
}
