package extauthz

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/wirekube/relay-ws/extauthz/internal/signkeys"
	"github.com/wirekube/relay-ws/internal/clientaddr"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
)

// signedHeaders is how many headers sign appends at most.
const signedHeaders = 2

// identitySigner signs the relay allows of an Authorizer. The zero value
// signs nothing; NewAuthorizer installs a per-start key so that an
// Authorizer never answers an allow the bridge would refuse as unsigned.
type identitySigner struct {
	cur atomic.Pointer[identitysig.Signer]
}

// sign adds X-WireKube-Client-Address (client, as Authorizer.clientAddress
// read it) and X-WireKube-Signature over it and the identity headers to a
// relay allow (one that carries X-WireKube-Peer) and to the bounce answer
// (over its binding alone, checks.go:bounce); other decisions are returned as they
// are.
func (s *identitySigner) sign(d Decision, client string) Decision {
	signer := s.cur.Load()
	if !d.Allowed() || signer == nil {
		return d
	}
	var f identitysig.Fields
	for _, h := range d.Headers {
		switch h.Name {
		case contract.HeaderPeer:
			f.Peer = h.Value
		case contract.HeaderPublicKey:
			f.PublicKey = h.Value
		case contract.HeaderIdentity:
			f.Identity = h.Value
		case contract.HeaderTokenExpires:
			f.TokenExpires = h.Value
		case contract.HeaderBinding:
			f.Binding = h.Value
		}
	}
	if f.Peer == "" && !d.Bounced {
		return d // not the relay path: nothing the bridge reads
	}
	hs := d.Headers
	if !d.signRoom {
		hs = slices.Clip(hs) // never append into an array another Decision may share
	}
	if client == clientaddr.Unknown {
		// Nothing named the client: no header, and the message of the
		// five fields a bridge that predates the client address verifies.
		d.Headers = append(hs, Header{contract.HeaderSignature, signer.Sign(f)})
		return d
	}
	f.ClientAddress = client
	d.Headers = append(hs, Header{contract.HeaderClientAddress, client}, Header{contract.HeaderSignature, signer.Sign(f)})
	return d
}

// installKeyring publishes kr's public keys, then signs with it (a reload
// of the key files).
func (a *Authorizer) installKeyring(kr *signkeys.Keyring, o signkeys.Options) error {
	if err := signkeys.Publish(kr, o); err != nil {
		return err
	}
	a.signer.cur.Store(kr.Signer())
	return nil
}

// runSigning re-reads the signing key files until ctx is done
// (signkeys.Run), publishing and installing each keyring that changed.
func (a *Authorizer) runSigning(ctx context.Context, o signkeys.Options, kr *signkeys.Keyring, log *slog.Logger) error {
	return signkeys.Run(ctx, o, kr, func(next *signkeys.Keyring) error { return a.installKeyring(next, o) }, log)
}
