package meshwatch

import (
	"flag"
	"fmt"
	"net/url"
	"strings"
)

// Options configure the WireKubeMesh watch (docs/extauthz.md#mesh-watch).
type Options struct {
	// MeshWatch watches the WireKubeMeshes (RBAC: get, list, watch on
	// wirekubemeshes). Default true. It only reports; without the RBAC the
	// watch stays unsynced and says so once in the log.
	MeshWatch bool
	// ExpectedRelayURL is this gateway's public wss:// URL, the one the
	// WireKubeMesh should send agents to. Empty (the default): only ws://
	// is reported, and any wss:// URL is wss_unverified (the gateway cannot
	// tell a foreign host from its own).
	ExpectedRelayURL string
}

// Config is the parsed form of Options.
type Config struct {
	Enabled  bool
	Expected *url.URL // nil: none
}

// DefaultOptions: watching, no expected URL.
func DefaultOptions() Options { return Options{MeshWatch: true} }

// AddFlags registers the two flags on fs, with o's values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.MeshWatch, "mesh-watch", o.MeshWatch,
		"watch the WireKubeMeshes and report relay settings that send agents' tokens elsewhere than --expected-relay-url or over ws://")
	fs.StringVar(&o.ExpectedRelayURL, "expected-relay-url", o.ExpectedRelayURL,
		"this gateway's public URL (wss://HOST[:PORT]/PATH) the WireKubeMesh should name; empty: only ws:// is reported")
}

// Validate reports a bad --expected-relay-url.
func (o *Options) Validate() error {
	_, err := parseExpectedRelayURL(o.ExpectedRelayURL)
	return err
}

// Complete returns the parsed form of validated options.
func (o *Options) Complete() Config {
	u, _ := parseExpectedRelayURL(o.ExpectedRelayURL) // validated
	return Config{Enabled: o.MeshWatch, Expected: u}
}

// parseExpectedRelayURL: "" is none; else wss://, a host, no user
// information, query or fragment.
func parseExpectedRelayURL(v string) (*url.URL, error) {
	if v == "" {
		return nil, nil
	}
	u, err := url.Parse(v)
	if err != nil || !strings.EqualFold(u.Scheme, "wss") || u.Hostname() == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("--expected-relay-url: want wss://HOST[:PORT]/PATH, got %q", v)
	}
	return u, nil
}
