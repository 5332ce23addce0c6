// Package revocation is the contract between wirekube-extauthz and
// wirekube-bridge for ending live sessions when their authorization ends
// (docs/revocation.md): the binding header extauthz sets on an allow answer,
// and the messages of the Watch stream the bridge opens to extauthz. It
// imports nothing of either server.
package revocation

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MaxBindingLen bounds a binding header value. The longest real binding
// (253-byte Pod and Node names) stays under 1,100 bytes.
const MaxBindingLen = 2048

// maxField bounds one field: Kubernetes names are at most 253 bytes, a
// ServiceAccount username at most 24+63+1+253.
const maxField = 348

// bindingVersion prefixes every binding; a new layout gets a new version.
const bindingVersion = "v1"

// ErrBinding is returned for a binding value that does not parse.
var ErrBinding = errors.New("revocation: binding invalid")

// Binding is what admitted a session: the TokenReview fields the identity
// rules read (ServiceAccount username and UID, bound Pod and Node names and
// UIDs) and the peer and key they led to. It holds no token and not the key
// itself, only its SHA-256. extauthz re-judges a Binding against its
// informers; it does not trust the values, it re-checks them.
type Binding struct {
	Identity  string // system:serviceaccount:<ns>:<name>
	SAUID     string
	PodName   string // empty unless the token is Pod-bound
	PodUID    string
	NodeName  string // empty unless the token names a Node
	NodeUID   string
	Peer      string // WireKubePeer name
	KeySHA256 [sha256.Size]byte
}

// KeyHash is the SHA-256 of a 32-byte public key as a Binding holds it.
func KeyHash(key []byte) [sha256.Size]byte { return sha256.Sum256(key) }

// fieldNames is the fixed order of the fields after the version.
var fieldNames = [...]string{"sa", "sauid", "pod", "poduid", "node", "nodeuid", "peer", "key"}

// Format renders b as a header value:
// v1;sa=<identity>;sauid=<uid>;pod=<name>;poduid=<uid>;node=<name>;nodeuid=<uid>;peer=<name>;key=<sha256 hex>.
func (b Binding) Format() string {
	vals := [...]string{b.Identity, b.SAUID, b.PodName, b.PodUID, b.NodeName, b.NodeUID, b.Peer, ""}
	var key [2 * sha256.Size]byte
	hex.Encode(key[:], b.KeySHA256[:])
	n := len(bindingVersion)
	for i, name := range fieldNames {
		n += 2 + len(name) + len(vals[i])
	}
	var sb strings.Builder
	sb.Grow(n + len(key)) // one allocation: every relay allow formats its binding
	sb.WriteString(bindingVersion)
	for i, name := range fieldNames {
		sb.WriteByte(';')
		sb.WriteString(name)
		sb.WriteByte('=')
		sb.WriteString(vals[i])
	}
	sb.Write(key[:]) // the last field, key
	return sb.String()
}

// ParseBinding parses a Format value strictly: the version, every field in
// order, only name characters, the identity, its UID, the peer and the key
// hash present. Any deviation is ErrBinding: fail closed.
func ParseBinding(s string) (Binding, error) {
	if len(s) > MaxBindingLen {
		return Binding{}, fmt.Errorf("%w: %d bytes", ErrBinding, len(s))
	}
	parts := strings.Split(s, ";")
	if len(parts) != len(fieldNames)+1 || parts[0] != bindingVersion {
		return Binding{}, fmt.Errorf("%w: not a %s binding of %d fields", ErrBinding, bindingVersion, len(fieldNames))
	}
	var vals [len(fieldNames)]string
	for i, name := range fieldNames {
		v, ok := strings.CutPrefix(parts[i+1], name+"=")
		if !ok || len(v) > maxField || !nameChars(v) {
			return Binding{}, fmt.Errorf("%w: field %d is not %s=<value>", ErrBinding, i+1, name)
		}
		vals[i] = v
	}
	b := Binding{Identity: vals[0], SAUID: vals[1], PodName: vals[2], PodUID: vals[3],
		NodeName: vals[4], NodeUID: vals[5], Peer: vals[6]}
	if b.Identity == "" || b.SAUID == "" || b.Peer == "" || (b.PodName == "") != (b.PodUID == "") {
		return Binding{}, fmt.Errorf("%w: identity, its UID and the peer are required; a Pod needs its UID", ErrBinding)
	}
	if len(vals[7]) != 2*sha256.Size {
		return Binding{}, fmt.Errorf("%w: key is not a SHA-256", ErrBinding)
	}
	if _, err := hex.Decode(b.KeySHA256[:], []byte(vals[7])); err != nil || strings.ToLower(vals[7]) != vals[7] {
		return Binding{}, fmt.Errorf("%w: key is not lower-case hex", ErrBinding)
	}
	return b, nil
}

// nameChars reports whether v holds only the characters of Kubernetes
// names, UIDs and ServiceAccount usernames.
func nameChars(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == ':', c == '_':
		default:
			return false
		}
	}
	return true
}
