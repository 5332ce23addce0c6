package bridge

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestSessionLogLinesAndMetrics: one start and one end line with the
// documented fields, no whole key and no token; every metric family exists.
func TestSessionLogLinesAndMetrics(t *testing.T) {
	k := testKey(1)
	h := startBridge(t, nil)
	hdr := identity(k)
	hdr.Set("Authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.secret-token")
	ws := h.dial(t, hdr)
	send(t, ws, relayproto.AppendRegister(nil, k))
	fs := &frameStream{t: t, ws: ws}
	echo(t, ws, fs, k, 1)
	h.stop() // drains: the session ends with 1001

	logs := h.logs.String()
	for _, leak := range []string{"secret-token", "eyJhbGci", k.Base64(), "Authorization"} {
		if strings.Contains(logs, leak) {
			t.Errorf("logs contain %q", leak)
		}
	}
	start, end := logLine(t, logs, "session started"), logLine(t, logs, "session ended")
	for _, line := range []map[string]any{start, end} {
		for field, want := range map[string]any{"peer": "node-a", "key": k.Fingerprint(),
			"identity": "system:serviceaccount:wirekube-system:wirekube-agent"} {
			if line[field] != want {
				t.Errorf("%s: %s = %v, want %v", line["msg"], field, line[field], want)
			}
		}
		if r, _ := line["remote"].(string); !strings.HasPrefix(r, "127.0.0.1:") {
			t.Errorf("%s: remote = %v", line["msg"], line["remote"])
		}
	}
	wantEnd := map[string]any{"close_code": 1001.0, "close_reason": string(contract.CloseDraining),
		"bytes_to_relay": float64(37 + 137), "bytes_to_client": 137.0}
	for field, want := range wantEnd {
		if end[field] != want {
			t.Errorf("session ended: %s = %v, want %v", field, end[field], want)
		}
	}
	if _, ok := end["duration"]; !ok {
		t.Error("session ended: no duration")
	}

	for _, name := range []string{"sessions_active", "sessions_total", "session_duration_seconds", "frames_total",
		"bytes_total", "rejects_total", "relay_dial_duration_seconds", "dropped_frames_total", "messages_total"} {
		if n, err := testutil.GatherAndCount(h.reg, "wirekube_bridge_"+name); err != nil || n == 0 {
			t.Errorf("metric wirekube_bridge_%s: %d series, %v", name, n, err)
		}
	}
	if got := testutil.ToFloat64(h.srv.metrics.toRelay[relayproto.TypeData].bytes); got != 137 {
		t.Errorf("bytes_total{client_to_relay,data} = %v, want 137", got)
	}
	if got := testutil.ToFloat64(h.srv.metrics.toClient[relayproto.TypeData].frames); got != 1 {
		t.Errorf("frames_total{relay_to_client,data} = %v, want 1", got)
	}
}

func logLine(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			return m
		}
	}
	t.Fatalf("no %q line in:\n%s", msg, logs)
	return nil
}
