package bridge

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestOptionsFlagsAndDefaults(t *testing.T) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.AddFlags(fs)
	want := map[string]string{
		"listen": "127.0.0.1:8081", "metrics-listen": ":9102", "relay-addr": DefaultRelayAddr, "path": "/relay",
		"relay-dial-timeout": "1s",
		"register-timeout":   "10s", "allowed-origins": "", "ping-interval": "20s", "write-timeout": "10s",
		"max-sessions": "20000", "unready-at": "0", "drain-timeout": "30s", "drain-peers": "", "drain-rate": "0", "log-format": "json", "log-level": "info",
		"revocation-addr": "unix:/run/wirekube-revocation/revocation.sock", "revocation-stale-timeout": "1m0s", "token-expiry-grace": "0s",
		"revocation-secret-file": "/run/wirekube-revocation/secret", "revocation-unready-after": "10s",
		"relay-wait": "7.5s", "relay-wait-max": "1000", "max-sessions-per-peer": "2", "max-unregistered-per-peer": "1",
		"key-mismatch-backoff-max": "1m0s", "debug-sessions": "false",
		"identity-keys-file": "/run/wirekube-revocation/identity-keys", "identity-signature-max-age": "30s",
		"identity-replay-cache-size": "65536", "identity-keys-reload-interval": "10s", "identity-replay-peer-share": "64",
		"reexport-metrics": "", "full-bounce": "bridge",
	}
	fs.VisitAll(func(f *flag.Flag) {
		if w, ok := want[f.Name]; !ok {
			t.Errorf("unexpected flag --%s", f.Name)
		} else if f.DefValue != w && !(f.Name == "allowed-origins" && f.DefValue == "") {
			t.Errorf("--%s default %q, want %q", f.Name, f.DefValue, w)
		}
		delete(want, f.Name)
	})
	for name := range want {
		t.Errorf("missing flag --%s", name)
	}
	if err := fs.Parse([]string{"--allowed-origins", "https://a.example, https://b.example", "--listen", "unix:/tmp/b.sock",
		"--allowed-origins", "https://c.example"}); err != nil {
		t.Fatal(err)
	}
	if len(o.AllowedOrigins) != 3 || o.AllowedOrigins[1] != "https://b.example" || o.AllowedOrigins[2] != "https://c.example" || o.Validate() != nil {
		t.Fatalf("origins %q, validate %v", o.AllowedOrigins, o.Validate())
	}
}

func TestOptionsValidateNamesTheFlag(t *testing.T) {
	tests := []struct {
		flag string
		mod  func(*Options)
	}{
		{"--listen", func(o *Options) { o.Listen = "" }},
		{"--listen", func(o *Options) { o.Listen = "8081" }},
		{"--listen", func(o *Options) { o.Listen = "unix:" }},
		{"--metrics-listen", func(o *Options) { o.MetricsListen = "localhost" }},
		{"--debug-sessions", func(o *Options) { o.DebugSessions, o.MetricsListen = true, "" }},
		{"--relay-addr", func(o *Options) { o.RelayAddr = "nohostport" }},
		{"--full-bounce", func(o *Options) { o.FullBounce = "extauthz" }},
		{"--path", func(o *Options) { o.Path = "relay" }},
		{"--path", func(o *Options) { o.Path = "/healthz" }},
		{"--register-timeout", func(o *Options) { o.RegisterTimeout = 0 }},
		{"--ping-interval", func(o *Options) { o.PingInterval = -time.Second }},
		{"--write-timeout", func(o *Options) { o.WriteTimeout = 0 }},
		{"--drain-timeout", func(o *Options) { o.DrainTimeout = 0 }},
		{"--drain-peers", func(o *Options) { o.DrainPeers = "replicas:9102" }},
		{"--drain-peers", func(o *Options) { o.DrainPeers = "dns://replicas" }},
		{"--drain-rate", func(o *Options) { o.DrainRate = -1 }},
		{"--relay-dial-timeout", func(o *Options) { o.RelayDialTimeout = 0 }},
		{"--max-sessions", func(o *Options) { o.MaxSessions = 0 }},
		{"--unready-at", func(o *Options) { o.UnreadyAt = -1 }},
		{"--unready-at", func(o *Options) { o.UnreadyAt = 101 }},
		{"--allowed-origins", func(o *Options) { o.AllowedOrigins = []string{"example.com"} }},
		{"--log-format", func(o *Options) { o.LogFormat = "xml" }},
		{"--revocation-addr", func(o *Options) { o.RevocationAddr = "extauthz" }},
		{"--revocation-addr", func(o *Options) { o.RevocationAddr = "unix:" }},
		{"--revocation-addr", func(o *Options) { o.RevocationAddr = "10.0.0.7:9004" }},
		{"--revocation-secret-file", func(o *Options) { o.RevocationSecretFile = "" }},
		{"--revocation-unready-after", func(o *Options) { o.RevocationUnreadyAfter = 0 }},
		{"--revocation-unready-after", func(o *Options) { o.RevocationUnreadyAfter = 2 * o.RevocationStaleTimeout }},
		{"--revocation-stale-timeout", func(o *Options) { o.RevocationStaleTimeout = 0 }},
		{"--token-expiry-grace", func(o *Options) { o.TokenExpiryGrace = -time.Second }},
		{"--identity-keys-reload-interval", func(o *Options) { o.IdentityKeysReloadInterval = 0 }},
		{"--identity-keys-reload-interval", func(o *Options) { o.IdentityKeysReloadInterval = 6 * time.Minute }},
	}
	for _, tt := range tests {
		o := DefaultOptions()
		tt.mod(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.flag) {
			t.Errorf("%s: Validate() = %v, want an error naming the flag", tt.flag, err)
		}
	}
	if o := DefaultOptions(); o.Validate() != nil {
		t.Fatalf("defaults invalid: %v", o.Validate())
	}
	o := DefaultOptions()
	o.MetricsListen, o.RevocationAddr = "", "" // both documented as "empty disables"
	if err := o.Validate(); err != nil {
		t.Fatalf("empty --metrics-listen and --revocation-addr: %v", err)
	}
}

// TestOptionsValidateReportsEveryProblem: Validate and Complete join every
// error, so one run shows all bad flags.
func TestOptionsValidateReportsEveryProblem(t *testing.T) {
	o := DefaultOptions()
	o.Listen, o.MaxSessions, o.LogFormat = "", 0, "xml"
	_, err := o.Complete()
	for _, f := range []string{"--listen", "--max-sessions", "--log-format"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("Complete() = %v, want it to name %s", err, f)
		}
	}
}
