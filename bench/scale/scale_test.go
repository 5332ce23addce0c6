package scale

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func TestMain(m *testing.M) {
	if asked, err := RunGeneratorIfAsked(); asked {
		if err != nil {
			fmt.Fprintln(os.Stderr, "scale generator:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m, testutil.ClientGoLeaks()...)
}

// BenchmarkScale is the many-agents run at DefaultConfig's size
// (WIREKUBE_SCALE_AGENTS, WIREKUBE_SCALE_BURST). It runs once whatever
// b.N is and prints its table.
func BenchmarkScale(b *testing.B) {
	if b.N > 1 {
		b.Skip("runs once")
	}
	cfg, err := DefaultConfig()
	if err != nil {
		b.Fatal(err)
	}
	res, err := Run(context.Background(), cfg, os.Stderr)
	if err != nil {
		b.Fatal(err)
	}
	res.Print(os.Stdout)
	b.ReportMetric(res.Burst.LastClose.Seconds(), "burst-last-close-s")
	b.ReportMetric(res.Kill.LastAdmission.Seconds(), "failover-last-admission-s")
}

// TestDialOrderSpreadsALostReplicasAgents: the agents of one replica try
// the others in alternating orders, so when it is lost they split over the
// rest instead of all landing on the next one.
func TestDialOrderSpreadsALostReplicasAgents(t *testing.T) {
	for _, c := range []struct {
		agent, replica int
		want           []int
	}{
		{0, 0, []int{0, 1, 2}},
		{3, 0, []int{0, 2, 1}},
		{6, 0, []int{0, 1, 2}},
		{4, 1, []int{1, 0, 2}},
		{1, 1, []int{1, 2, 0}},
	} {
		got := dialOrder(genAgent{I: c.agent, Replica: c.replica}, 3)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("agent %d of replica %d: order %v, want %v", c.agent, c.replica, got, c.want)
		}
	}
}

// TestParseEvent reads a generator line back into its parts.
func TestParseEvent(t *testing.T) {
	ev, ok := parseEvent("F 17 1700000000000000123 503 review_throttled")
	if !ok || ev.kind != "F" || ev.agent != 17 || ev.at.UnixNano() != 1700000000000000123 ||
		fmt.Sprint(ev.fields) != "[503 review_throttled]" {
		t.Errorf("parsed %+v %v", ev, ok)
	}
	if _, ok := parseEvent("U x 12"); ok {
		t.Error("a line with a non-numeric agent parsed")
	}
}
