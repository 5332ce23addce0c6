// Package probe is wirekube-relay-probe: it connects to the WireKube relay
// gateway the way an agent does and reports every stage (DNS, TCP, TLS, HTTP
// upgrade, Register, echo through the relay) with its time, the deny or close
// reason, a one-line fix, and a distinct exit code per failure class.
//
// The token is read from a file and is never printed, logged or put in the
// report; keys are shown only as fingerprints.
package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/crypto/curve25519"

	"github.com/wirekube/relay-ws/internal/cli/output"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/logging"
	"github.com/wirekube/relay-ws/relayproto"
)

// Defaults of the flags.
const (
	DefaultTimeout = 10 * time.Second
	DefaultCount   = 3
	// MaxCount bounds --count so a typo cannot flood a relay.
	MaxCount = 10000
	// MaxIdle bounds --idle.
	MaxIdle = 15 * time.Minute
	// AgentKeepalive is the WireKube agent's Keepalive period, which the
	// probe keeps while it holds a session idle.
	AgentKeepalive = 25 * time.Second
)

// Options are the probe's flags. Validate checks them without touching the
// file system; Complete reads the files and returns the parsed config.
type Options struct {
	// URL is the relay endpoint, ws:// or wss://. Required.
	URL string
	// TokenFile holds the bearer token (whitespace trimmed). Empty means send
	// no Authorization header (expect 401 token_missing). Default
	// contract.AgentTokenPath.
	TokenFile string
	// PublicKey is the base64 WireGuard public key to register. Exactly one of
	// PublicKey and PrivateKeyFile is required.
	PublicKey string
	// PrivateKeyFile holds a base64 WireGuard private key; the public key is
	// derived from it (X25519 with the base point) and the private key is
	// never sent or printed.
	PrivateKeyFile string
	// CAFile replaces the system roots with the PEM certificates in it.
	CAFile string
	// InsecureSkipVerify disables certificate verification. Dangerous: the
	// token is then sent to whoever answers.
	InsecureSkipVerify bool
	// Timeout bounds the connection (DNS to upgrade) and each echo round
	// trip. Zero means DefaultTimeout (10 s).
	Timeout time.Duration
	// Count is the number of echo round trips. Zero means DefaultCount (3).
	Count int
	// Output is the report format of -o/--output: "text" (default), "json"
	// or "yaml" (output.Formats, the same in every tool).
	Output string
	// Register runs the full test: Register the key with the relay and echo
	// Data frames through it. The relay then replaces the node's live
	// session (the agent reconnects). Default false: the check mode
	// (subprotocol wirekube.relay.probe.v1) proves TLS, the upgrade, the
	// authorization, the key and relay reachability without a Register.
	Register bool

	// Proxy is --proxy: how the probe reaches the gateway, as the agent's
	// wirekube.io/relay-proxy annotation or WIREKUBE_RELAY_PROXY says:
	// "environment" (HTTPS_PROXY/HTTP_PROXY/NO_PROXY as Go's
	// http.ProxyFromEnvironment reads them), "none", or an explicit
	// http://[USER:PASS@]HOST:PORT. Empty: WIREKUBE_RELAY_PROXY, else none
	// (the agent's order when the Node has no annotation).
	Proxy string
	// Idle, with Register, holds the session after the echo for this long
	// as an idle agent holds it (a Keepalive every 25 s, pings answered),
	// then echoes once more: a path that closes idle sessions sooner is
	// named (ExitIdleClosed). Zero: no idle hold. At most MaxIdle.
	Idle time.Duration

	// LogLevel of the diagnostic lines on stderr (--log-level): debug adds
	// one line per stage; the report itself goes to stdout. Default info.
	LogLevel string

	// lookupHost replaces DNS resolution in tests. Nil: net.DefaultResolver.
	lookupHost func(ctx context.Context, host string) ([]string, error)
	// getenv replaces os.Getenv in tests. Nil: os.Getenv.
	getenv func(string) string
}

// Config is Options after Complete: every file read, every default set.
// Run and Probe take it.
type Config struct {
	url        *url.URL
	token      string // never printed
	key        relayproto.Key
	tls        *tls.Config
	timeout    time.Duration
	count      int
	output     string
	register   bool
	proxy      *url.URL   // the forward proxy to dial through; nil: direct
	proxyInfo  *ProxyInfo // what the report says about it
	idle       time.Duration
	lookupHost func(ctx context.Context, host string) ([]string, error)
	log        *slog.Logger // diagnostics (Command sets it); nil: none
}

// AddFlags registers one flag per option on fs, with o's values as
// defaults (start from DefaultOptions).
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.URL, "url", o.URL, "relay endpoint, wss://HOST[:PORT]/relay or ws://... (required)")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "file holding the bearer token (trimmed, never printed); empty sends no token")
	fs.StringVar(&o.PublicKey, "public-key", o.PublicKey, "WireGuard public key to register (base64)")
	fs.StringVar(&o.PrivateKeyFile, "private-key-file", o.PrivateKeyFile, "WireGuard private key file (base64); the public key is derived from it")
	fs.StringVar(&o.CAFile, "ca-file", o.CAFile, "PEM CA bundle to verify the gateway with instead of the system roots")
	fs.BoolVar(&o.InsecureSkipVerify, "insecure-skip-verify", o.InsecureSkipVerify, "do not verify the gateway certificate (dangerous: the token goes to whoever answers)")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "limit for connecting (DNS to upgrade) and for each echo round trip")
	fs.IntVar(&o.Count, "count", o.Count, "number of echo round trips through the relay")
	output.AddFlag(fs, &o.Output)
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "level of the diagnostic lines on stderr (debug: one per stage): debug, info, warn or error")
	fs.StringVar(&o.Proxy, "proxy", o.Proxy, "forward proxy, as the agent's "+NodeAnnotationRelayProxy+" annotation or "+EnvRelayProxy+": environment (HTTPS_PROXY/NO_PROXY), none, or http://[USER:PASS@]HOST:PORT; empty: "+EnvRelayProxy+", else none")
	fs.DurationVar(&o.Idle, "idle", o.Idle, "with --register: hold the session idle this long as an agent does (keepalive every 25s), then echo again; names a path that closes idle sessions (e.g. 65s)")
	fs.BoolVar(&o.Register, "register", o.Register, "full test: register the key with the relay and echo through it (replaces the node's live session: its agent reconnects)")
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{TokenFile: contract.AgentTokenPath, Timeout: DefaultTimeout, Count: DefaultCount, Output: "text", LogLevel: logging.DefaultLevel}
}

// Validate reports every invalid flag (joined), each error naming its flag,
// as one usage error (ExitUsage).
func (o Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := o.validateURL(); err != nil {
		errs = append(errs, err)
	}
	if (o.PublicKey == "") == (o.PrivateKeyFile == "") {
		add("exactly one of --public-key and --private-key-file is required")
	}
	if o.PublicKey != "" {
		if _, err := relayproto.ParseKey(o.PublicKey); err != nil {
			add("--public-key: want 32 bytes in standard base64: %v", err)
		}
	}
	if o.CAFile != "" && o.InsecureSkipVerify {
		add("--ca-file and --insecure-skip-verify exclude each other")
	}
	if o.Timeout < 0 {
		add("--timeout: must not be negative, got %s", o.Timeout)
	}
	if o.Count < 0 || o.Count > MaxCount {
		add("--count: want 1..%d, got %d", MaxCount, o.Count)
	}
	if o.Idle < 0 || o.Idle > MaxIdle {
		add("--idle: want 0..%s, got %s", MaxIdle, o.Idle)
	}
	if o.Idle > 0 && !o.Register {
		add("--idle: only with --register (the check mode ends right after its Register)")
	}
	if o.Output != "" {
		if err := output.Check(o.Output); err != nil {
			errs = append(errs, err)
		}
	}
	if o.LogLevel != "" {
		if _, err := logging.ParseLevel(o.LogLevel); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return nil
}

// validateURL checks --url; the URL text never appears in the error (it
// may hold a token).
func (o Options) validateURL() error {
	if o.URL == "" {
		return fmt.Errorf("--url is required (e.g. wss://relay.example.com%s)", contract.DefaultRelayPath)
	}
	u, err := url.Parse(o.URL)
	switch {
	case err != nil:
		return fmt.Errorf("--url: cannot parse it: %v", redactURLError(err))
	case u.Scheme != "ws" && u.Scheme != "wss":
		return fmt.Errorf("--url: scheme must be ws or wss, got %q", u.Scheme)
	case u.Host == "":
		return fmt.Errorf("--url: no host")
	case u.User != nil:
		return fmt.Errorf("--url: credentials in the URL are refused (they leak into logs); use --token-file")
	}
	return nil
}

// redactURLError drops the URL text from a parse error: it may hold a token.
func redactURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// Complete validates o, reads the token, key and CA files, and fills in the
// defaults.
func (o Options) Complete() (*Config, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	u, _ := url.Parse(o.URL)
	c := &Config{url: u, timeout: o.Timeout, count: o.Count, output: o.Output, register: o.Register, idle: o.Idle, lookupHost: o.lookupHost}
	if c.output == "" {
		c.output = "text"
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.count == 0 {
		c.count = DefaultCount
	}
	if c.lookupHost == nil {
		c.lookupHost = net.DefaultResolver.LookupHost
	}
	var err error
	if c.token, err = readToken(o.TokenFile); err != nil {
		return nil, err
	}
	if c.key, err = o.publicKey(); err != nil {
		return nil, err
	}
	if c.tls, err = o.tlsConfig(u.Hostname()); err != nil {
		return nil, err
	}
	if c.proxy, c.proxyInfo, err = o.chooseProxy(u); err != nil {
		return nil, err
	}
	return c, nil
}

// chooseProxy decides the forward proxy as the agent would for u.
func (o Options) chooseProxy(u *url.URL) (*url.URL, *ProxyInfo, error) {
	getenv := o.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	choice, err := resolveProxyFlag(o.Proxy, getenv)
	if err != nil {
		return nil, nil, &ExitError{Code: ExitUsage, Err: err}
	}
	info := &ProxyInfo{Mode: choice.mode, Source: choice.source}
	switch choice.mode {
	case ProxyModeExplicit:
		info.URL = redactProxyURL(choice.url)
		return choice.url, info, nil
	case ProxyModeEnvironment:
		p, name, err := envProxy(u, getenv)
		if err != nil {
			return nil, nil, &ExitError{Code: ExitUsage, Err: err}
		}
		if p == nil {
			info.Detail = "no proxy applies to " + hostPortOf(u) + " (" + envNone(u, name) + "): dialed directly, as the agent would"
			return nil, info, nil
		}
		info.URL, info.Detail = redactProxyURL(p), "from "+name
		return p, info, nil
	}
	for _, v := range []string{"HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"} {
		if getenv(v) != "" {
			info.Detail = v + " is set but not used: the agent too dials directly unless its Node's " +
				NodeAnnotationRelayProxy + " or " + EnvRelayProxy + " says environment"
			break
		}
	}
	return nil, info, nil
}

// envNone says why the environment chose no proxy.
func envNone(u *url.URL, name string) string {
	want := "HTTPS_PROXY"
	if u.Scheme == "ws" {
		want = "HTTP_PROXY"
	}
	switch {
	case name == "":
		return want + " is not set (" + u.Scheme + ":// uses " + want + " only)"
	case u.Hostname() == "localhost" || net.ParseIP(u.Hostname()) != nil && net.ParseIP(u.Hostname()).IsLoopback():
		return "Go never proxies loopback or localhost"
	default:
		return "NO_PROXY matches, or " + name + " is set but REQUEST_METHOD (CGI) is too"
	}
}

// readToken reads and trims the token the way the agent does. An empty path
// means no token.
func readToken(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usageErrorf("--token-file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", usageErrorf("--token-file: %s is empty", path)
	}
	if strings.ContainsAny(tok, " \t\r\n") {
		return "", usageErrorf("--token-file: %s holds more than one word (want one bearer token)", path)
	}
	return tok, nil
}

func (o Options) publicKey() (relayproto.Key, error) {
	if o.PublicKey != "" {
		return relayproto.ParseKey(o.PublicKey) // checked by Validate
	}
	b, err := os.ReadFile(o.PrivateKeyFile)
	if err != nil {
		return relayproto.Key{}, usageErrorf("--private-key-file: %w", err)
	}
	k, err := PublicFromPrivate(string(bytes.TrimSpace(b)))
	if err != nil {
		return relayproto.Key{}, usageErrorf("--private-key-file: %w", err)
	}
	return k, nil
}

// PublicFromPrivate derives a WireGuard public key from a base64 private
// key, as `wg pubkey` does (X25519 clamps the scalar).
func PublicFromPrivate(privB64 string) (relayproto.Key, error) {
	priv, err := base64.StdEncoding.DecodeString(privB64)
	if err != nil || len(priv) != curve25519.ScalarSize {
		return relayproto.Key{}, fmt.Errorf("want a 32-byte private key in standard base64")
	}
	pub, err := curve25519.X25519(priv, curve25519.Basepoint)
	if err != nil {
		return relayproto.Key{}, fmt.Errorf("derive public key: %w", err)
	}
	return relayproto.KeyFromBytes(pub)
}

func (o Options) tlsConfig(host string) (*tls.Config, error) {
	cfg := &tls.Config{
		ServerName:         host,
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: o.InsecureSkipVerify, // #nosec: explicit operator flag
		// WebSocket upgrades need HTTP/1.1; offer nothing else.
		NextProtos: []string{"http/1.1"},
	}
	if o.CAFile == "" {
		return cfg, nil // system roots (SSL_CERT_FILE honoured), as the agent
	}
	pem, err := os.ReadFile(o.CAFile)
	if err != nil {
		return nil, usageErrorf("--ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, usageErrorf("--ca-file: %s holds no PEM certificate", o.CAFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}
