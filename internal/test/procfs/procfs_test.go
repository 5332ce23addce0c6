package procfs

import (
	"os"
	"testing"
)

func TestStealShare(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b CPUTimes
		want float64
	}{
		{"a tenth stolen", CPUTimes{Total: 1000, Steal: 10}, CPUTimes{Total: 2000, Steal: 110}, 0.1},
		{"no time passed", CPUTimes{Total: 1000, Steal: 10}, CPUTimes{Total: 1000, Steal: 10}, 0},
		{"counter went back", CPUTimes{Total: 2000}, CPUTimes{Total: 1000}, 0},
	} {
		if got := StealShare(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: StealShare = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReadsThisProcess: this test process has a resident size and a peak
// of at least that, and the machine's CPU counters read with steal within
// the total.
func TestReadsThisProcess(t *testing.T) {
	rss, err := RSSBytes(os.Getpid())
	if err != nil || rss <= 0 {
		t.Fatalf("RSSBytes = %d, %v", rss, err)
	}
	if _, err := StatusBytes(os.Getpid(), "NoSuchField"); err == nil {
		t.Fatal("StatusBytes of a missing field: no error")
	}
	if _, err := CPUSeconds(os.Getpid()); err != nil {
		t.Fatalf("CPUSeconds: %v", err)
	}
	m, err := MachineCPU()
	if err != nil || m.Total <= 0 || m.Steal < 0 || m.Steal > m.Total {
		t.Fatalf("MachineCPU = %+v, %v", m, err)
	}
}

// TestParseNetstat reads a field of /proc/net/netstat's header-and-values
// line pairs.
func TestParseNetstat(t *testing.T) {
	text := "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 4176 4180\nIpExt: InNoRoutes\nIpExt: 0\n"
	if v, err := parseNetstat(text, "TcpExt:", "ListenOverflows"); err != nil || v != 4176 {
		t.Errorf("ListenOverflows %d, %v; want 4176", v, err)
	}
	if _, err := parseNetstat(text, "TcpExt:", "NoSuchField"); err == nil {
		t.Error("a missing field parsed")
	}
	if _, err := ListenOverflows(); err != nil {
		t.Errorf("this machine's counter: %v", err)
	}
}
