package roomwatch

import (
	"flag"
	"fmt"
	"net/netip"
	"net/url"
)

// Options configure the room watch (docs/steering.md).
type Options struct {
	// BridgeRoomURL is the bridge's GET /room in this Pod,
	// http://127.0.0.1:<bridge metrics port>/room. Empty (the default): not
	// read, and extauthz steers nothing (the bridge bounces and refuses on
	// its own). Only a loopback address: the room decides whom extauthz
	// turns away, so only the bridge beside it may say it.
	BridgeRoomURL string
}

// AddFlags registers the flag on fs, with o's value as default.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.BridgeRoomURL, "bridge-room-url", o.BridgeRoomURL,
		"the bridge's GET /room in this Pod (http://127.0.0.1:PORT/room): past its full mark extauthz refuses or bounces new relay sessions before any TokenReview; empty: off")
}

// Validate reports a bad --bridge-room-url.
func (o *Options) Validate() error {
	_, err := parseRoomURL(o.BridgeRoomURL)
	return err
}

// parseRoomURL: "" is none; else http:// on a loopback IP address, no
// user information, query or fragment.
func parseRoomURL(v string) (*url.URL, error) {
	if v == "" {
		return nil, nil
	}
	u, err := url.Parse(v)
	if err == nil && u.Scheme == "http" && u.User == nil && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" {
		if ip, perr := netip.ParseAddr(u.Hostname()); perr == nil && ip.IsLoopback() {
			return u, nil
		}
	}
	return nil, fmt.Errorf("--bridge-room-url: want http://LOOPBACK-IP[:PORT]/PATH (the bridge in this Pod), got %q", v)
}
