// Package clientaddr reads the client's address the way extauthz records it
// and the bridge shows it (docs/spec.md#client-address): from the
// X-Forwarded-For the front itself wrote, counting only the hops an
// operator trusts, and never as the raw string a client sent. It imports
// nothing of either server.
package clientaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Invalid is recorded for an entry that is not an IP address: the raw
// value is never logged (a client may have written it).
const Invalid = "invalid"

// Unknown is recorded when nothing names the client (no X-Forwarded-For,
// no peer address; a bridge whose extauthz sent no client address).
const Unknown = "unknown"

// Unverified is recorded when the check did not come from a front the
// operator trusts (--trusted-proxies): whatever it says of the client,
// X-Forwarded-For or Envoy's source address, was chosen by whoever asked,
// which may be the client itself.
const Unverified = "unverified"

// DefaultTrustedProxies are the fronts trusted by default: loopback, the
// fronts in extauthz's own network namespace (Envoy in the Pod, the nginx
// snippet, docker-compose). A front that reaches extauthz over the network
// must be named.
const DefaultTrustedProxies = "127.0.0.0/8,::1/128"

// MaxTrustedHops bounds --trusted-hops.
const MaxTrustedHops = 8

// Canonical returns s parsed as an IP address (an IPv4-mapped IPv6 address
// unmapped, a zone dropped, an "addr:port" form reduced to its address) in
// netip's canonical form; Unknown for an empty s, Invalid for anything
// else. Surrounding spaces are ignored.
func Canonical(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return Unknown
	}
	a, ok := parse(s)
	if !ok {
		return Invalid
	}
	// s itself when it is already canonical (what a front writes): no
	// allocation on extauthz's cache-hit path.
	var buf [64]byte
	if string(a.AppendTo(buf[:0])) == s {
		return s
	}
	return a.String()
}

// parse reads an address, or an address with a port (what a front's own
// remote address looks like, "192.0.2.1:443" or "[2001:db8::1]:443").
func parse(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

// FromForwardedFor returns the entry of an X-Forwarded-For list that
// trustedHops proxies in front of the front vouch for: the last entry (the
// address the front itself saw and appended, or set alone) when
// trustedHops is 0, the one before it when 1, and so on. values are the
// header's lines in order, each a comma-separated list. A list shorter
// than trustedHops+1 yields its first entry: the front dropped what came
// before a hop it does not trust, so the first entry is its own peer.
// Everything left of the chosen entry is what a client may have written:
// it is never returned. ok is false when the list has no entry. Allocates
// nothing.
func FromForwardedFor(values []string, trustedHops int) (entry string, ok bool) {
	skip := trustedHops
	var first string
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for end := len(v); end >= 0; {
			start := strings.LastIndexByte(v[:end], ',') + 1
			e := strings.TrimSpace(v[start:end])
			end = start - 1
			if e == "" {
				continue // "a,,b" or a trailing comma: no entry
			}
			if skip == 0 {
				return e, true
			}
			skip--
			first, ok = e, true
		}
	}
	return first, ok
}

// ParsePrefixes reads a comma-separated list of CIDR prefixes or single
// addresses (a host prefix); spaces around an item are ignored and an
// empty list is none.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			a, aerr := netip.ParseAddr(item)
			if aerr != nil || a.Zone() != "" {
				return nil, fmt.Errorf("want a CIDR prefix or an IP address, got %q", item)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// Front is the connection a check came on, as extauthz's listener saw it:
// its peer's address, or Local for a Unix socket (only a process sharing
// its filesystem, the Pod's, reaches it). The zero value is unknown.
type Front struct {
	Addr  netip.Addr
	Local bool
}

// FrontOf is the Front of a connection's remote address: a TCP peer, a
// Unix socket, or unknown for anything else. Allocates nothing.
func FrontOf(a net.Addr) Front {
	switch a := a.(type) {
	case *net.TCPAddr:
		return Front{Addr: a.AddrPort().Addr().Unmap()}
	case *net.UnixAddr:
		return Front{Local: true}
	}
	return Front{}
}

// FrontOfString is the Front of an "ip:port" remote address (net/http's
// Request.RemoteAddr); unknown when it is not one. Allocates nothing.
func FrontOfString(s string) Front {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return Front{Addr: ap.Addr().Unmap()}
	}
	return Front{}
}

// TrustedBy reports whether a check from f is believed about the client:
// a Unix socket always, an address in one of trusted, nothing else. An
// unknown front vouches for nothing.
func (f Front) TrustedBy(trusted []netip.Prefix) bool {
	if f.Local {
		return true
	}
	if !f.Addr.IsValid() {
		return false
	}
	for _, p := range trusted {
		if p.Contains(f.Addr) {
			return true
		}
	}
	return false
}
