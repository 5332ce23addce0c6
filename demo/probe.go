package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// probeBinary is the operator's connectivity check; `make build` puts it in
// bin/ next to the binaries the demo runs.
const probeBinary = "wirekube-relay-probe"

// probePath is the probe in --bin-dir, or "" when there is none (the demo
// then leaves the probe step out rather than report a check it did not
// make).
func (e *env) probePath() string {
	if e.opts.BinDir == "" {
		return ""
	}
	p := filepath.Join(e.opts.BinDir, probeBinary)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// runProbe runs the real wirekube-relay-probe as an operator would on
// node-a, with the files of the state dir, and returns its verdict line.
// It runs in the probe's default check mode (wirekube.relay.probe.v1):
// the gateway checks node-a's key and reaches the relay, and nothing is
// registered, so a live node-a session would be left alone.
func (e *env) runProbe(ctx context.Context, bin string, n *node) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "--url", e.url(), "--token-file", n.tokenFile,
		"--ca-file", e.caFile, "--private-key-file", n.keyFile)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, werr := e.state.writeFile("logs/probe-"+n.name+".log", out.Bytes(), 0o644); werr != nil {
		err = errors.Join(err, werr)
	}
	echo, result := "", ""
	for line := range strings.Lines(out.String()) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "ok   echo"), strings.HasPrefix(line, "FAIL echo"),
			strings.HasPrefix(line, "ok   register"), strings.HasPrefix(line, "FAIL register"):
			echo = strings.Join(strings.Fields(line)[3:], " ")
		case strings.HasPrefix(line, "result:"):
			result = line
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s %s: %w (%s; see %s)", probeBinary, n.name, err, result, e.state.join("logs", "probe-"+n.name+".log"))
	}
	return fmt.Sprintf("%s as %s: %s, %s", probeBinary, n.name, result, echo), nil
}
