package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// TestInvalidFlags: every invalid value fails at start, naming its flag.
func TestInvalidFlags(t *testing.T) {
	tests := []struct{ flag, value string }{
		{"grpc-listen", "nohostport"},
		{"http-listen", "unix:"},
		{"metrics-listen", "9103"},
		{"audience", ""},
		{"agent-service-account", "no-slash"},
		{"peer-namespace", "Bad_NS"},
		{"peer-service-account-prefix", "UPPER-"},
		{"relay-path", "relay"},
		{"allowed-origins", "evil.example.com"},
		{"authn-only-path", "/metrics/../x"},
		{"allow-service-account", "ns/"},
		{"cache-size", "0"},
		{"cache-ttl", "-1s"},
		{"negative-cache-ttl", "-1s"},
		{"max-inflight-reviews", "0"},
		{"check-timeout", "0s"},
		{"kube-api-qps", "0"},
		{"kube-api-burst", "0"},
		{"log-format", "xml"},
		{"log-level", "verbose"},
		{"service-account-issuer", "two issuers"},
		{"jwks-refresh-interval", "500ms"},
		{"jwks-min-refresh-interval", "0s"},
		{"on-review-unavailable", "allow"},
		{"offline-window", "0s"},
		{"max-review-wait", "0s"},
	}
	for _, tc := range tests {
		t.Run(tc.flag, func(t *testing.T) {
			err := run(context.Background(), []string{"--" + tc.flag + "=" + tc.value}, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), "--"+tc.flag) {
				t.Errorf("err = %v, want one naming --%s", err, tc.flag)
			}
		})
	}
}

func TestAuthnOnlyNeedsAllowlist(t *testing.T) {
	err := run(context.Background(), []string{"--authn-only-path=/metrics"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--allow-service-account") {
		t.Errorf("err = %v", err)
	}
}

func TestKubeconfigMissing(t *testing.T) {
	err := run(context.Background(), []string{"--kubeconfig=/nonexistent/kubeconfig"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("err = %v", err)
	}
}

// TestInvalidFlagsReportedTogether: one run reports each of ten bad flags
// (five of Options, five of VerifyOptions), not only the first.
func TestInvalidFlagsReportedTogether(t *testing.T) {
	bad := map[string]string{
		"cache-size": "0", "relay-path": "relay", "agent-service-account": "x", "allowed-origins": "evil", "log-format": "xml",
		"service-account-issuer": "a b", "jwks-refresh-interval": "0s", "max-review-wait": "0s",
		"on-review-unavailable": "allow", "offline-window": "0s",
	}
	var args []string
	for f, v := range bad {
		args = append(args, "--"+f+"="+v)
	}
	err := run(context.Background(), args, io.Discard, io.Discard)
	for f := range bad {
		if err == nil || !strings.Contains(err.Error(), "--"+f+":") {
			t.Errorf("err = %v, want it to name --%s", err, f)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	var stdout strings.Builder
	if err := run(context.Background(), []string{"--version"}, &stdout, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "wirekube-extauthz dev (go") {
		t.Fatalf("stdout %q", stdout.String())
	}
}
