package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/refrelay"
	"github.com/wirekube/relay-ws/internal/refrelay/refrelaytest"
)

func TestMain(m *testing.M) {
	if asked, err := RunChildIfAsked(); asked {
		if err != nil {
			fmt.Fprintln(os.Stderr, "bridge child:", err)
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
// run) by every unit test run.
func TestWorkloadSmall(t *testing.T) {
	relay, addr := startRelay(t)
	cfg := Config{Frames: 500, Payload: 1400, Window: 16, PingPongs: 50, PingPayload: 16, IdleSessions: 20}
	res, err := Run(context.Background(), cfg, relay, addr)
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	res.Print(&sb)
	t.Log("\n" + sb.String())
	if res.Direct.MBps <= 0 || res.Bridge.MBps <= 0 || res.Bridge.P50 <= 0 {
		t.Fatalf("empty measurements: %+v", res)
	}
}

// BenchmarkBridge is `make bench`'s fixed workload (DefaultConfig). It runs
// once whatever b.N is and prints the report; the ratios are reported as
// benchmark metrics too.
func BenchmarkBridge(b *testing.B) {
	raiseFileLimit(b)
	relay, addr := startRelay(b)
	var once sync.Once
	var res Result
	var err error
	for b.Loop() {
		once.Do(func() { res, err = Run(context.Background(), DefaultConfig(), relay, addr) })
	}
	if err != nil {
		b.Fatal(err)
	}
	res.Print(os.Stdout)
	b.ReportMetric(res.Bridge.MBps/res.Direct.MBps, "throughput_ratio")
	b.ReportMetric(float64(res.Bridge.P50-res.Direct.P50)/1e3, "p50_added_us")
	b.ReportMetric(res.BridgeProcess.MBps/res.Direct.MBps, "process_throughput_ratio")
	b.ReportMetric(float64(res.BridgeProcess.P50-res.Direct.P50)/1e3, "process_p50_added_us")
	b.ReportMetric(res.RSSGC/1024, "KiB/idle_session")
}

// raiseFileLimit lifts the soft descriptor limit to the hard one: the idle
// run holds 2 descriptors per session here (client and relay side).
func raiseFileLimit(tb testing.TB) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		tb.Fatal(err)
	}
}
