package demo

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
)

func passingReport() *Report {
	var attacks []AttackResult
	for _, a := range Attacks() {
		attacks = append(attacks, AttackResult{Attack: a, Got: a.Want})
	}
	return &Report{
		Steps: []Step{
			{Name: "etcd and kube-apiserver running", OK: true, Detail: "https://127.0.0.1:6443", Took: 4200 * time.Millisecond},
			{Name: "traffic both ways", OK: true, Detail: "12.3 MB/s", Took: 3 * time.Second},
		},
		Attacks: attacks,
		Traffic: &Traffic{Duration: 2 * time.Second, BytesAB: 30e6, BytesBA: 20e6, FramesAB: 900, FramesBA: 600,
			RTTs: 200, RTTP50: 412 * time.Microsecond, RTTP99: 2345 * time.Microsecond},
		Where: Where{Front: "nginx", URL: "wss://127.0.0.1:8443/relay",
			ExtauthzMetrics: "http://127.0.0.1:9103/metrics", BridgeMetrics: "http://127.0.0.1:9104/metrics",
			Kubeconfig: "/s/kubeconfig", CAFile: "/s/ca.crt", TokenFiles: []string{"/s/tokens/node-a", "/s/tokens/node-b"},
			LogDir: "/s/logs", StateDir: "/s"},
	}
}

func TestReportText(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(r *Report)
		ok      bool
		want    []string
		notWant []string
	}{
		{
			name: "all passed",
			ok:   true,
			want: []string{
				"✓ etcd and kube-apiserver running (4.2s): https://127.0.0.1:6443",
				"✓  another node's key           close 1008 register_key_mismatch  close 1008 register_key_mismatch",
				"✓  no token                     HTTP 401 token_missing",
				"✓  deleted Pod                  HTTP 403 pod_not_found",
				"throughput  25.0 MB/s over 2s (a->b 30.0 MB in 900 frames, b->a 20.0 MB in 600 frames)",
				"round trip  p50 412µs, p99 2.345ms (200 round trips a->b->a)",
				"extauthz metrics  http://127.0.0.1:9103/metrics",
				"token files       /s/tokens/node-a /s/tokens/node-b",
				"Result: ✓ every step behaved",
			},
			notWant: []string{"✗"},
		},
		{
			name:   "a failed step",
			mutate: func(r *Report) { r.Steps[1].OK, r.Steps[1].Detail = false, "b->a receive: frame 7: lost" },
			want:   []string{"✗ traffic both ways (3s): b->a receive: frame 7: lost", "Result: ✗"},
		},
		{
			name: "an attack answered differently",
			mutate: func(r *Report) {
				r.Attacks[1].Got = Outcome{Kind: KindOpen}
			},
			want: []string{"✗  no token                     HTTP 401 token_missing            session stayed open", "Result: ✗"},
		},
		{
			name:    "no traffic measured",
			mutate:  func(r *Report) { r.Traffic = nil },
			ok:      true,
			notWant: []string{"throughput"},
		},
		{
			name:   "no steps at all is not a pass",
			mutate: func(r *Report) { r.Steps = nil },
			want:   []string{"Result: ✗"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := passingReport()
			if tt.mutate != nil {
				tt.mutate(r)
			}
			if r.OK() != tt.ok {
				t.Errorf("OK() = %v, want %v", r.OK(), tt.ok)
			}
			var b strings.Builder
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, b.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(b.String(), w) {
					t.Errorf("report has %q:\n%s", w, b.String())
				}
			}
		})
	}
}

// TestAttackTable pins the expectations to the contract (docs/spec.md#deny-reasons):
// every refusal carries the status its reason maps to, the key mismatch is
// a 1008 close, and each attack appears once, in the documented order.
func TestAttackTable(t *testing.T) {
	want := map[string]Outcome{
		AttackOtherNodesKey: {KindClose, websocket.ClosePolicyViolation, "register_key_mismatch"},
		AttackNoToken:       {KindHTTP, 401, "token_missing"},
		AttackWrongAudience: {KindHTTP, 401, "audience_mismatch"},
		AttackTokenInURL:    {KindHTTP, 400, "token_in_url"},
		AttackDeletedPod:    {KindHTTP, 403, "pod_not_found"},
		AttackDeletedLive:   {KindClose, websocket.ClosePolicyViolation, "pod_not_found"},
	}
	order := []string{AttackOtherNodesKey, AttackNoToken, AttackWrongAudience, AttackTokenInURL, AttackDeletedPod, AttackDeletedLive}
	got := Attacks()
	if len(got) != len(order) {
		t.Fatalf("%d attacks, want %d", len(got), len(order))
	}
	for i, a := range got {
		if a.Name != order[i] {
			t.Errorf("attack %d is %q, want %q", i, a.Name, order[i])
		}
		if a.Want != want[a.Name] {
			t.Errorf("%s: want %v, the contract says %v", a.Name, a.Want, want[a.Name])
		}
		if a.Want.Kind == KindHTTP && contract.Reason(a.Want.Reason).HTTPStatus() != a.Want.Code {
			t.Errorf("%s: HTTP %d for %s, contract.HTTPStatus says %d", a.Name, a.Want.Code, a.Want.Reason, contract.Reason(a.Want.Reason).HTTPStatus())
		}
		if a.What == "" {
			t.Errorf("%s: no description", a.Name)
		}
	}
}

func TestAttackResultOK(t *testing.T) {
	a := Attacks()[0]
	tests := []struct {
		name string
		got  Outcome
		ok   bool
	}{
		{"exact", a.Want, true},
		{"other reason", Outcome{KindClose, 1008, "register_missing"}, false},
		{"other code", Outcome{KindClose, 1011, "register_key_mismatch"}, false},
		{"HTTP instead of close", Outcome{KindHTTP, 1008, "register_key_mismatch"}, false},
		{"let in", Outcome{Kind: KindOpen}, false},
		{"not run", Outcome{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (AttackResult{Attack: a, Got: tt.got}).OK(); got != tt.ok {
				t.Errorf("OK() = %v, want %v", got, tt.ok)
			}
		})
	}
}

func TestRoundDurationAndBytes(t *testing.T) {
	durations := map[time.Duration]string{
		12345 * time.Millisecond: "12.3s", 1234 * time.Millisecond: "1.23s", 45678 * time.Microsecond: "45.7ms",
		412345 * time.Nanosecond: "412µs", 5 * time.Microsecond: "5µs",
	}
	for d, want := range durations {
		if got := roundDuration(d).String(); got != want {
			t.Errorf("roundDuration(%s) = %s, want %s", d, got, want)
		}
	}
	sizes := map[int64]string{0: "0 B", 999: "999 B", 1500: "1.5 kB", 2_500_000: "2.5 MB", 3_210_000_000: "3.21 GB"}
	for n, want := range sizes {
		if got := humanBytes(n); got != want {
			t.Errorf("humanBytes(%d) = %s, want %s", n, got, want)
		}
	}
}
