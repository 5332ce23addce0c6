package demo

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Step is one thing the demo did, with its verdict.
type Step struct {
	Name   string
	OK     bool
	Detail string // one line: what was measured or why it failed
	Took   time.Duration
}

// AttackResult is one attack and the answer the gateway gave.
type AttackResult struct {
	Attack
	Got    Outcome
	Detail string // e.g. how long after the Pod deletion the deny came
}

// OK reports whether the gateway answered exactly as expected.
func (r AttackResult) OK() bool { return r.Got == r.Want }

// Traffic is what the two agents measured.
type Traffic struct {
	Duration       time.Duration
	BytesAB        int64 // payload bytes node-a -> node-b, all verified
	BytesBA        int64
	FramesAB       int
	FramesBA       int
	RTTs           int // round trips measured
	RTTP50, RTTP99 time.Duration
}

// MBps is the verified payload throughput of both directions together, in
// MB/s (10^6 bytes).
func (t Traffic) MBps() float64 {
	if t.Duration <= 0 {
		return 0
	}
	return float64(t.BytesAB+t.BytesBA) / 1e6 / t.Duration.Seconds()
}

// Where lists the places a user looks at after (or, with `up`, during) a run.
type Where struct {
	Front           string // "nginx" or "envoy"
	URL             string // wss://127.0.0.1:port/relay
	HTTPSBase       string // https://127.0.0.1:port
	ExtauthzMetrics string // http://127.0.0.1:port/metrics
	BridgeMetrics   string
	Kubeconfig      string
	CAFile          string
	TokenFiles      []string
	KeyFiles        []string // WireGuard private keys, one per node
	MetricsSnapshot []string // /metrics saved just before shutdown
	LogDir          string
	StateDir        string
}

// Report is the outcome of one demo run.
type Report struct {
	Steps   []Step
	Attacks []AttackResult
	Traffic *Traffic // nil when the traffic step did not run
	Where   Where
}

// OK is true only when every step passed, every expected attack ran and
// each was answered as expected.
func (r *Report) OK() bool {
	if len(r.Steps) == 0 {
		return false
	}
	for _, s := range r.Steps {
		if !s.OK {
			return false
		}
	}
	for _, a := range r.Attacks {
		if !a.OK() {
			return false
		}
	}
	return true
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// WriteText prints the report as a user reads it at the end of `make demo`.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	b.WriteString("\nWireKube relay gateway demo\n\nSteps\n")
	for _, s := range r.Steps {
		fmt.Fprintf(&b, "  %s %s", mark(s.OK), s.Name)
		if s.Took > 0 {
			fmt.Fprintf(&b, " (%s)", roundDuration(s.Took))
		}
		if s.Detail != "" {
			fmt.Fprintf(&b, ": %s", s.Detail)
		}
		b.WriteByte('\n')
	}
	if len(r.Attacks) > 0 {
		b.WriteString("\nAttacks\n")
		writeAttackTable(&b, r.Attacks)
	}
	if t := r.Traffic; t != nil {
		b.WriteString("\nTraffic (payload bytes, each verified intact and in order)\n")
		fmt.Fprintf(&b, "  throughput  %.1f MB/s over %s (a->b %s in %d frames, b->a %s in %d frames)\n",
			t.MBps(), roundDuration(t.Duration), humanBytes(t.BytesAB), t.FramesAB, humanBytes(t.BytesBA), t.FramesBA)
		fmt.Fprintf(&b, "  round trip  p50 %s, p99 %s (%d round trips a->b->a)\n",
			roundDuration(t.RTTP50), roundDuration(t.RTTP99), t.RTTs)
	}
	writeWhere(&b, r.Where)
	if r.OK() {
		b.WriteString("\nResult: ✓ every step behaved\n")
	} else {
		b.WriteString("\nResult: ✗ something did not behave (see the ✗ lines and the logs)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeAttackTable(b *strings.Builder, attacks []AttackResult) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  \tattack\texpected\tgot")
	for _, a := range attacks {
		got := a.Got.String()
		if a.Detail != "" {
			got += " (" + a.Detail + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", mark(a.OK()), a.Name, a.Want, got)
	}
	tw.Flush()
}

func writeWhere(b *strings.Builder, w Where) {
	b.WriteString("\nWhere to look\n")
	line := func(name, v string) {
		if v != "" {
			fmt.Fprintf(b, "  %-17s %s\n", name, v)
		}
	}
	line("front", w.Front)
	line("relay URL", w.URL)
	line("extauthz metrics", w.ExtauthzMetrics)
	line("bridge metrics", w.BridgeMetrics)
	line("metrics snapshot", strings.Join(w.MetricsSnapshot, " "))
	line("kubeconfig", w.Kubeconfig)
	line("CA (front)", w.CAFile)
	line("token files", strings.Join(w.TokenFiles, " "))
	line("private keys", strings.Join(w.KeyFiles, " "))
	line("logs", w.LogDir)
	line("state dir", w.StateDir)
}

// roundDuration keeps three significant digits or so: 1.23s, 456ms, 78µs.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= 10*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}

func humanBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
