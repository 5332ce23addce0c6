package bridge

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/wirekube/relay-ws/internal/clientaddr"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// ErrIdentityHeader is returned when an identity header set by the proxy is
// missing, repeated or malformed: the proxy is misconfigured.
var ErrIdentityHeader = errors.New("bridge: identity header invalid")

// peerIdentity is what the proxy vouched for, from the ext_authz answer.
type peerIdentity struct {
	Peer         string         // WireKubePeer name
	Key          relayproto.Key // the only key this session may register
	Subject      string         // authenticated ServiceAccount username
	TokenExpires time.Time
	// Binding is X-WireKube-Binding as the proxy passed it: what the
	// bridge hands back to extauthz on the revocation stream.
	Binding string
	// RequestID is the front's request id (logging.RequestID: checked,
	// bounded), logged with every line of the session.
	RequestID string
	// ClientAddress is the client's address as extauthz established and
	// signed it (X-WireKube-Client-Address, parsed again here:
	// clientaddr.Canonical, "unknown" when extauthz sent none,
	// "unverified" when extauthz did not trust the front that asked it),
	// logged and listed; clientUnverified on a deny line before the
	// signature was checked. It decides nothing.
	ClientAddress string
}

// clientUnverified is the client address of a deny line written before the
// identity headers' signature verified: the header could be anyone's.
const clientUnverified = clientaddr.Unverified

// parseClientAddress reads X-WireKube-Client-Address into
// id.ClientAddress: optional (an extauthz that predates the client address sends none), at
// most once, and never kept as the string that arrived (only its parsed
// form, or "invalid"). The signature covers the value as sent.
func parseClientAddress(h http.Header, id *peerIdentity) error {
	v := h.Values(contract.HeaderClientAddress)
	switch {
	case len(v) == 0:
		id.ClientAddress = clientaddr.Unknown
		return nil
	case len(v) > 1:
		return fmt.Errorf("%w: %s repeated", ErrIdentityHeader, contract.HeaderClientAddress)
	case !contract.PrintableHeaderValue(v[0]):
		return fmt.Errorf("%w: %s empty, too long or not printable", ErrIdentityHeader, contract.HeaderClientAddress)
	}
	id.ClientAddress = clientaddr.Canonical(v[0])
	if v[0] == clientaddr.Unverified {
		// extauthz's word that no trusted front named the client.
		id.ClientAddress = clientaddr.Unverified
	}
	return nil
}

// parseIdentity reads exactly the headers of docs/spec.md#identity-headers. Each must appear
// exactly once (a repeated header could be a client copy the proxy failed
// to strip) and be well formed. Any failure is a deny: fail closed.
func parseIdentity(h http.Header) (peerIdentity, error) {
	var id peerIdentity
	var key, expires string
	for _, f := range []struct {
		name string
		dst  *string
	}{
		{contract.HeaderPeer, &id.Peer}, {contract.HeaderPublicKey, &key},
		{contract.HeaderIdentity, &id.Subject}, {contract.HeaderTokenExpires, &expires},
	} {
		v := h.Values(f.name)
		switch {
		case len(v) == 0:
			return peerIdentity{}, fmt.Errorf("%w: %s missing", ErrIdentityHeader, f.name)
		case len(v) > 1:
			return peerIdentity{}, fmt.Errorf("%w: %s repeated", ErrIdentityHeader, f.name)
		case !contract.PrintableHeaderValue(v[0]):
			return peerIdentity{}, fmt.Errorf("%w: %s empty, too long or not printable", ErrIdentityHeader, f.name)
		}
		*f.dst = v[0]
	}
	var err error
	if id.Key, err = relayproto.ParseKey(key); err != nil {
		return peerIdentity{}, fmt.Errorf("%w: %s: not 32 bytes of base64", ErrIdentityHeader, contract.HeaderPublicKey)
	}
	if id.TokenExpires, err = time.Parse(time.RFC3339, expires); err != nil {
		return peerIdentity{}, fmt.Errorf("%w: %s: not RFC 3339", ErrIdentityHeader, contract.HeaderTokenExpires)
	}
	return id, nil
}
