package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/relayproto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr error  // nil: any non-nil error
		wantOut string // substring of stderr
	}{
		{"help names the fixture", []string{"--help"}, flag.ErrHelp, "TEST FIXTURE"},
		{"help lists the listen default", []string{"-h"}, flag.ErrHelp, `default "127.0.0.1:3478"`},
		{"bad log format", []string{"--log-format", "xml"}, nil, ""},
		{"bad log level", []string{"--log-level", "loud"}, nil, ""},
		{"unknown flag", []string{"--nope"}, nil, "flag provided but not defined"},
		{"stray argument", []string{"extra"}, nil, ""},
		{"zero queue depth", []string{"--queue-depth", "0"}, nil, ""},
		{"bad listen address", []string{"--listen", "nocolon"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tt.args, io.Discard, &out)
			if err == nil || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("run = %v, want %v", err, tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Fatalf("stderr %q lacks %q", out.String(), tt.wantOut)
			}
		})
	}
}

// TestRunServesUntilCancel starts the binary's run on a free port, learns
// the address from its JSON log, echoes a frame through it and stops it.
func TestRunServesUntilCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"--listen", "127.0.0.1:0", "--log-format", "json"}, io.Discard, pw)
		pw.Close()
		done <- err
	}()
	lines := bufio.NewScanner(pr)
	addr := listenAddr(t, lines)
	drained := make(chan struct{})
	go func() { defer close(drained); _, _ = io.Copy(io.Discard, pr) }()

	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var k relayproto.Key
	k[0] = 1
	msg := relayproto.AppendData(relayproto.AppendRegister(nil, k), k, []byte("ping"))
	if _, err := conn.Write(msg); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := relayproto.ReadFrame(conn, nil)
	if err != nil || f.Type != relayproto.TypeData || !bytes.HasSuffix(f.Body, []byte("ping")) {
		t.Fatalf("echo = %#v %q, %v", f.Type, f.Body, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v, want nil after cancel", err)
	}
	<-drained
}

func listenAddr(t *testing.T, lines *bufio.Scanner) string {
	t.Helper()
	for lines.Scan() {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if err := json.Unmarshal(lines.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", lines.Text(), err)
		}
		if strings.Contains(rec.Msg, "listening") {
			return rec.Addr
		}
	}
	t.Fatalf("no listening line: %v", lines.Err())
	return ""
}

func TestVersionFlag(t *testing.T) {
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "wirekube-refrelay dev (go") {
		t.Fatalf("stdout %q", stdout.String())
	}
}
