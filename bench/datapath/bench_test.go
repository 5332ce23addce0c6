package datapath

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/internal/test/refrelay/refrelaytest"
)

func TestMain(m *testing.M) {
	if asked, err := RunChildIfAsked(); asked {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func startRelay(tb testing.TB) (*refrelay.Server, string) {
	return refrelaytest.Start(tb, refrelay.Options{DisableUDP: true, Logger: slog.New(slog.DiscardHandler)})
}

// TestWorkloadSmall runs the whole workload at a small size, so the
// benchmark's code is exercised (and its checks of order and integrity
// run) by every unit test run. It times nothing.
func TestWorkloadSmall(t *testing.T) {
	relay, addr := startRelay(t)
	cfg := Config{Frames1400: 300, Frames16K: 50, Window: 16, PingPongs: 50, PingPayload: 16, IdleSessions: 20,
		NoNginx: nginxBinary() == ""}
	res, err := Run(context.Background(), cfg, relay, addr)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	res.Print(&sb)
	t.Log("\n" + sb.String())
	for _, name := range res.Order {
		if f := res.Paths[name]; f.MBps[small] <= 0 || f.MBps[large] <= 0 || f.P50 <= 0 {
			t.Errorf("%s: empty measurements: %+v", name, f)
		}
	}
	if !strings.Contains(sb.String(), "| bridge CPU s/GB, 1,400 B") {
		t.Errorf("report lacks the table")
	}
}

// BenchmarkBridge is `make bench`'s fixed workload (DefaultConfig). It runs
// once whatever b.N is and prints the report; the main ratios are reported
// as benchmark metrics too.
func BenchmarkBridge(b *testing.B) {
	cfg := DefaultConfig()
	if n, err := strconv.Atoi(os.Getenv("WIREKUBE_BENCH_ROUNDS")); err == nil && n > 0 {
		cfg.Rounds = n // for trying one lever quickly; `make bench` leaves it unset
	}
	if n, err := strconv.Atoi(os.Getenv("WIREKUBE_BENCH_IDLE")); err == nil && n > 0 {
		cfg.IdleSessions = n // idle sessions per memory reading; `make bench` leaves it unset
	}
	cfg.IdleSessions = raiseFileLimit(b, cfg.IdleSessions)
	relay, addr := startRelay(b)
	var once sync.Once
	var res *Result
	var err error
	for b.Loop() {
		once.Do(func() { res, err = Run(context.Background(), cfg, relay, addr) })
	}
	if err != nil {
		b.Fatal(err)
	}
	res.Print(os.Stdout)
	br, nv, d := res.Paths[pBridge], res.Paths[pNaive], res.Paths[pDirect]
	b.ReportMetric(br.totalCPU(small)/nv.totalCPU(small), "cpu_ratio_1400")
	b.ReportMetric(br.totalCPU(large)/nv.totalCPU(large), "cpu_ratio_16k")
	b.ReportMetric(br.totalRSS()/1024, "KiB/idle_session")
	b.ReportMetric(br.MBps[small]/d.MBps[small], "throughput_ratio")
	b.ReportMetric(float64(br.P50-d.P50)/1e3, "p50_added_us")
	b.ReportMetric(100*res.Steal, "steal_%")
}

// raiseFileLimit lifts the descriptor limit of this process (the children
// inherit it): every process of the idle run holds two descriptors per
// session (here the client and the in-process relay's side; in a gateway
// its client and its upstream). The hard limit is raised when the process
// may (CAP_SYS_RESOURCE); otherwise the session count is cut to what the
// hard limit allows, and the report says how many were opened.
func raiseFileLimit(tb testing.TB, sessions int) int {
	want := uint64(2*sessions + 4096)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	if lim.Max < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return sessions
		}
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	if fit := int(lim.Max-4096) / 2; fit < sessions {
		tb.Logf("descriptor limit %d: %d idle sessions instead of %d", lim.Max, fit, sessions)
		return max(fit, 100)
	}
	return sessions
}
