package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--ping-interval=0s"}, "--ping-interval"},
		{[]string{"--max-sessions=-1"}, "--max-sessions"},
		{[]string{"--log-format=yaml"}, "--log-format"},
		{[]string{"--relay-addr=bad"}, "--relay-addr"},
		{[]string{"--register-timeout=soon"}, "register-timeout"},
		{[]string{"extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		err := run(context.Background(), tt.args, &stderr)
		if err == nil || !strings.Contains(err.Error()+stderr.String(), tt.want) {
			t.Errorf("run(%q) = %v, want an error naming %s", tt.args, err, tt.want)
		}
	}
}

// TestRunServesUnixSocketAndStopsOnCancel: --listen unix:/path works and a
// cancelled context (what SIGTERM does) drains and returns.
func TestRunServesUnixSocketAndStopsOnCancel(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "bridge.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--listen=unix:" + sock, "--metrics-listen=", "--drain-timeout=1s"}, &stderr)
	}()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := client.Get("http://bridge/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("/healthz = %d", resp.StatusCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never served: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	client.CloseIdleConnections()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}
