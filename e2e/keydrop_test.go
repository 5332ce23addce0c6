//go:build e2e

package e2e

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// keyDropWithin bounds how long a key dropped from extauthz's accepted keys
// stays trusted by the running bridge: extauthz re-reads its key files
// every 10 s and rewrites the keys file, the bridge re-reads that every
// --identity-keys-reload-interval (10 s), plus a margin for a loaded
// machine.
const keyDropWithin = 30 * time.Second

// testDroppedSigningKey: the last step of a rotation (docs/revocation.md#rotation)
// against the running stack. extauthz signs with one key and publishes a
// second as accepted; an answer signed with the second is admitted by the
// bridge. Once the second is dropped from the accepted keys file, the same
// bridge, never restarted and asked nothing else, refuses it 403
// identity_signature_invalid, and still admits what extauthz signs.
// extauthz is restored to its per-start key at the end.
func (e *env) testDroppedSigningKey(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	signing, dropped := newEd25519(t), newEd25519(t)
	signingFile, acceptedFile := filepath.Join(dir, "signing.pem"), filepath.Join(dir, "accepted.pem")
	writePEM(t, signingFile, "PRIVATE KEY", signing)
	writePEM(t, acceptedFile, "PUBLIC KEY", dropped.Public())
	fatalIf(t, e.stack.RestartExtauthz(ctx, []string{"--identity-signing-key-file=" + signingFile,
		"--identity-accepted-keys-file=" + acceptedFile}))
	id := e.podAgent(t, "s14-keydrop")
	bridge := testagent.Options{URL: "ws://" + e.stack.BridgeAddr + contract.DefaultRelayPath}
	signedWith := func(k ed25519.PrivateKey) testagent.Options {
		h := e.extauthzAllow(t, id.token)
		if k != nil {
			f := fieldsOf(h)
			f.ClientAddress = h.Get(contract.HeaderClientAddress)
			h.Set(contract.HeaderSignature, identitysig.NewSigner(k, nil).Sign(f))
		}
		o := bridge
		o.Header = h
		return o
	}
	defer func() { // back to the per-start key, trusted by the bridge at its first upgrade
		fatalIf(t, e.stack.RestartExtauthz(ctx, nil))
		fatalIf(t, e.dialKeyDrop(ctx, signedWith(nil), id))
	}()

	// Published as accepted: admitted at the first upgrade that names it
	// (the bridge sees the keys file changed and re-reads it), with no wait
	// after extauthz's restart.
	fatalIf(t, e.dialKeyDrop(ctx, signedWith(dropped), id))

	writePEM(t, acceptedFile, "PUBLIC KEY", signing.Public()) // the rotation's last step
	start := time.Now()
	for {
		c, err := testagent.DialRaw(ctx, signedWith(dropped))
		if err == nil {
			c.Close()
		}
		var de *testagent.DialError
		if errors.As(err, &de) && de.Status == http.StatusForbidden && de.Reason == string(contract.ReasonIdentitySignatureInvalid) {
			t.Logf("the dropped key refused %s after the accepted keys file changed", time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > keyDropWithin {
			t.Fatalf("the dropped key still admitted %s after it left the accepted keys (last: %v)", keyDropWithin, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	fatalIf(t, e.dialKeyDrop(ctx, signedWith(nil), id)) // extauthz's own signature still verifies
}

// dialKeyDrop registers id's key through o and closes the session.
func (e *env) dialKeyDrop(ctx context.Context, o testagent.Options, id identity) error {
	c, err := testagent.Dial(ctx, o, id.key)
	if err != nil {
		return err
	}
	return c.Close()
}

func newEd25519(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(nil)
	fatalIf(t, err)
	return k
}

// writePEM replaces path with k in PEM (PKCS #8 or PKIX) by a rename, as a
// Secret volume's update swaps the file.
func writePEM(t *testing.T, path, typ string, k any) {
	t.Helper()
	var der []byte
	var err error
	if typ == "PRIVATE KEY" {
		der, err = x509.MarshalPKCS8PrivateKey(k)
	} else {
		der, err = x509.MarshalPKIXPublicKey(k)
	}
	fatalIf(t, err)
	tmp := path + ".tmp"
	fatalIf(t, os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	fatalIf(t, os.Rename(tmp, path))
}
