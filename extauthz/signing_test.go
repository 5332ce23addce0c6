package extauthz

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/signkeys"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
)

// writeKeyPEM writes a fresh Ed25519 private key as PKCS #8 PEM (what
// openssl genpkey and Helm's genPrivateKey "ed25519" write) and returns it.
func writeKeyPEM(t *testing.T, path string) ed25519.PrivateKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	must(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	must(t, err)
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	return priv
}

// TestRelayAllowSignature: a relay allow carries X-WireKube-Signature, and
// a bridge reading the published keys file verifies it over exactly the
// identity headers of that answer, once.
func TestRelayAllowSignature(t *testing.T) {
	dir := t.TempDir()
	o := SigningOptions{IdentitySigningKeyFile: filepath.Join(dir, "key.pem"), IdentityKeysFile: filepath.Join(dir, "keys")}
	writeKeyPEM(t, o.IdentitySigningKeyFile)
	e := newEnv(t, nil)
	kr, err := signkeys.Load(o)
	must(t, err)
	must(t, e.authz.installKeyring(kr, o))

	resp, _ := e.srv.Check(fromLoopback(), relayCheck(e.answer(static(podBound())),
		func(h map[string]string) { h["x-forwarded-for"] = "6.6.6.6, 198.51.100.4" }))
	got := map[string][]string{}
	for _, h := range resp.GetOkResponse().GetHeaders() {
		got[h.GetHeader().GetKey()] = append(got[h.GetHeader().GetKey()], h.GetHeader().GetValue())
	}
	one := func(name string) string {
		if len(got[name]) != 1 {
			t.Fatalf("%s: %d values in the allow, want 1 (answer %v)", name, len(got[name]), got)
		}
		return got[name][0]
	}
	f := identitysig.Fields{Peer: one(contract.HeaderPeer), PublicKey: one(contract.HeaderPublicKey),
		Identity: one(contract.HeaderIdentity), TokenExpires: one(contract.HeaderTokenExpires), Binding: one(contract.HeaderBinding),
		ClientAddress: one(contract.HeaderClientAddress)}
	if f.ClientAddress != "198.51.100.4" {
		t.Fatalf("%s = %q, want the x-forwarded-for entry Envoy appended, 198.51.100.4", contract.HeaderClientAddress, f.ClientAddress)
	}
	v := &identitysig.Verifier{Keys: identitysig.NewFileKeys(o.IdentityKeysFile, time.Second).Lookup,
		MaxAge: 30 * time.Second, Replay: identitysig.NewReplayCache(4)}
	sig := []string{one(contract.HeaderSignature)}
	for _, want := range []contract.Reason{"", contract.ReasonIdentitySignatureReplayed} {
		if reason, err := v.Verify(sig, f); reason != want {
			t.Fatalf("Verify = %q (%v), want %q", reason, err, want)
		}
	}
}

// TestPerStartKeyIsMAC: without a signing key file, a relay allow carries
// an m1 (HMAC-SHA256) value under the key written to the keys file with
// mode 0640; the bridge's FileKeys verifies it once, and a verifier that
// trusts public keys only refuses it.
func TestPerStartKeyIsMAC(t *testing.T) {
	o := SigningOptions{IdentityKeysFile: filepath.Join(t.TempDir(), "keys")}
	e := newEnv(t, nil)
	kr, err := signkeys.Load(o)
	must(t, err)
	must(t, e.authz.installKeyring(kr, o))
	if st, err := os.Stat(o.IdentityKeysFile); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("keys file: %v (%v), want mode 0640", st, err)
	}
	resp, _ := e.srv.Check(fromLoopback(), relayCheck(e.answer(static(podBound())), nil))
	var f identitysig.Fields
	var sig []string
	for _, h := range resp.GetOkResponse().GetHeaders() {
		switch v := h.GetHeader().GetValue(); h.GetHeader().GetKey() {
		case contract.HeaderPeer:
			f.Peer = v
		case contract.HeaderPublicKey:
			f.PublicKey = v
		case contract.HeaderIdentity:
			f.Identity = v
		case contract.HeaderTokenExpires:
			f.TokenExpires = v
		case contract.HeaderBinding:
			f.Binding = v
		case contract.HeaderClientAddress:
			f.ClientAddress = v
		case contract.HeaderSignature:
			sig = append(sig, v)
		}
	}
	if len(sig) != 1 || !strings.HasPrefix(sig[0], "m1.") {
		t.Fatalf("signature values %q, want one m1 value", sig)
	}
	keys := identitysig.NewFileKeys(o.IdentityKeysFile, time.Second)
	pubOnly := &identitysig.Verifier{Keys: keys.Lookup, MaxAge: 30 * time.Second, Replay: identitysig.NewReplayCache(4)}
	if reason, _ := pubOnly.Verify(sig, f); reason != contract.ReasonIdentitySignatureInvalid {
		t.Fatalf("public keys only: Verify = %q, want %q", reason, contract.ReasonIdentitySignatureInvalid)
	}
	v := &identitysig.Verifier{Keys: keys.Lookup, MACKeys: keys.LookupMAC, MaxAge: 30 * time.Second, Replay: identitysig.NewReplayCache(4)}
	for _, want := range []contract.Reason{"", contract.ReasonIdentitySignatureReplayed} {
		if reason, err := v.Verify(sig, f); reason != want {
			t.Fatalf("Verify = %q (%v), want %q", reason, err, want)
		}
	}
}

// TestSigningKeyReload (synctest): a rotated key file is picked up within
// one reload interval, published before it signs; a broken file keeps the
// keys in use.
func TestSigningKeyReload(t *testing.T) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		o := SigningOptions{IdentitySigningKeyFile: filepath.Join(dir, "key.pem"),
			IdentityAcceptedKeysFile: filepath.Join(dir, "accepted.pem"), IdentityKeysFile: filepath.Join(dir, "keys")}
		old := writeKeyPEM(t, o.IdentitySigningKeyFile)
		writeKeyPEM(t, o.IdentityAcceptedKeysFile) // the next key, published ahead
		e := newEnv(t, nil)
		kr, err := signkeys.Load(o)
		must(t, err)
		must(t, e.authz.installKeyring(kr, o))
		published := func() map[string]ed25519.PublicKey {
			b, err := os.ReadFile(o.IdentityKeysFile)
			must(t, err)
			keys, err := identitysig.ParsePublicKeys(b)
			must(t, err)
			return keys
		}
		if n := len(published()); n != 2 {
			t.Fatalf("published %d keys, want the signing and the accepted key", n)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.authz.runSigning(ctx, o, kr, e.authz.log) }()

		must(t, os.WriteFile(o.IdentitySigningKeyFile, []byte("not a key"), 0o600))
		time.Sleep(signkeys.ReloadInterval)
		synctest.Wait()
		if id := e.authz.signer.cur.Load().KeyID(); id != identitysig.KeyID(old.Public().(ed25519.PublicKey)) {
			t.Fatalf("a broken key file replaced the signer (%s)", id)
		}
		next := writeKeyPEM(t, o.IdentitySigningKeyFile)
		must(t, os.WriteFile(o.IdentityAcceptedKeysFile, pemOfPublic(t, old.Public()), 0o600))
		time.Sleep(signkeys.ReloadInterval)
		synctest.Wait()
		nextID := identitysig.KeyID(next.Public().(ed25519.PublicKey))
		if id := e.authz.signer.cur.Load().KeyID(); id != nextID {
			t.Fatalf("signer %s after the reload, want %s", id, nextID)
		}
		keys := published()
		if _, ok := keys[nextID]; !ok || len(keys) != 2 {
			t.Fatalf("published %v, want the new and the previous key", keys)
		}
		cancel()
		must(t, <-done)
	})
}

// TestSigningAcceptedKeysFileOptional: a missing accepted keys file
// publishes the signing key alone; once it exists its key is published
// too; a file that does not parse is still an error.
func TestSigningAcceptedKeysFileOptional(t *testing.T) {
	dir := t.TempDir()
	o := SigningOptions{IdentitySigningKeyFile: filepath.Join(dir, "signing.pem"),
		IdentityAcceptedKeysFile: filepath.Join(dir, "accepted.pem")}
	signing := writeKeyPEM(t, o.IdentitySigningKeyFile)
	kr, err := signkeys.Load(o)
	must(t, err)
	signingID := identitysig.KeyID(signing.Public().(ed25519.PublicKey))
	if ids := kr.Fingerprints(); len(ids) != 1 || ids[0] != signingID {
		t.Fatalf("published %v without accepted.pem, want only the signing key %s", ids, signingID)
	}
	accepted := writeKeyPEM(t, o.IdentityAcceptedKeysFile)
	kr, err = signkeys.Load(o)
	must(t, err)
	acceptedID := identitysig.KeyID(accepted.Public().(ed25519.PublicKey))
	if ids := kr.Fingerprints(); len(ids) != 2 || ids[1] != acceptedID {
		t.Fatalf("published %v with accepted.pem, want %s and %s", ids, signingID, acceptedID)
	}
	must(t, os.WriteFile(o.IdentityAcceptedKeysFile, []byte("not a key"), 0o600))
	if _, err := signkeys.Load(o); err == nil || !strings.Contains(err.Error(), "--identity-accepted-keys-file") {
		t.Fatalf("loadKeyring with a broken accepted.pem = %v, want an error naming --identity-accepted-keys-file", err)
	}
}

func pemOfPublic(t *testing.T, pub any) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	must(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// TestSigningOptionsValidate: an accepted keys file without a signing key
// file is refused, naming the flag.
func TestSigningOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	o.IdentityAcceptedKeysFile = "/x"
	if _, err := o.Complete(); err == nil || !strings.Contains(err.Error(), "--identity-accepted-keys-file") {
		t.Fatalf("Complete = %v, want an error naming --identity-accepted-keys-file", err)
	}
}

// TestSignAppendsInPlaceOnlyWithRoom: sign appends into a decision's spare
// capacity only when the decision made that room for it (signRoom); a
// Headers slice it was handed keeps its backing array untouched.
func TestSignAppendsInPlaceOnlyWithRoom(t *testing.T) {
	var s identitySigner
	s.cur.Store(identitysig.NewMACSigner(identitysig.NewMACKey(), nil))
	backing := make([]Header, 1, 3)
	backing[0] = Header{contract.HeaderPeer, "node-a"}
	for _, room := range []bool{false, true} {
		clear(backing[:3])
		backing[0] = Header{contract.HeaderPeer, "node-a"}
		d := s.sign(Decision{Headers: backing[:1], signRoom: room}, "203.0.113.7")
		shared := &d.Headers[0] == &backing[0]
		if shared != room {
			t.Errorf("signRoom %v: answer shares the backing array: %v", room, shared)
		}
		if !room && backing[:3][1] != (Header{}) {
			t.Errorf("signRoom false: the handed-in array was written: %v", backing[:3])
		}
		if len(d.Headers) != 3 || d.Headers[1].Name != contract.HeaderClientAddress || d.Headers[2].Name != contract.HeaderSignature {
			t.Errorf("signRoom %v: headers %v, want peer, client address, signature", room, d.Headers)
		}
	}
}
