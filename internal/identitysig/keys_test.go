package identitysig

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func pemOf(t *testing.T, typ string, k any) []byte {
	t.Helper()
	var der []byte
	var err error
	if typ == "PRIVATE KEY" {
		der, err = x509.MarshalPKCS8PrivateKey(k)
	} else {
		der, err = x509.MarshalPKIXPublicKey(k)
	}
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// opensslKey is `openssl genpkey -algorithm ed25519` output (generated for
// this test; it signs nothing anywhere): the form operators provision.
const opensslKey = `-----BEGIN PRIVATE KEY-----
MC4CAQAwBQYDK2VwBCIEIBljYce95mZAQ87VPEhpfhTnzbCRK3UAapOf5S5Zecw4
-----END PRIVATE KEY-----
`

func TestParsePEMKeys(t *testing.T) {
	a, b := fixedKey(1), fixedKey(2)
	privs, pubs, err := ParsePEMKeys(append(pemOf(t, "PRIVATE KEY", a), pemOf(t, "PUBLIC KEY", b.Public())...))
	if err != nil || len(privs) != 1 || !privs[0].Equal(a) || len(pubs) != 2 ||
		!pubs[0].Equal(a.Public()) || !pubs[1].Equal(b.Public()) {
		t.Fatalf("ParsePEMKeys = %d private, %d public, %v", len(privs), len(pubs), err)
	}
	if privs, _, err := ParsePEMKeys([]byte(opensslKey)); err != nil || len(privs) != 1 {
		t.Fatalf("openssl's key: %d private, %v", len(privs), err)
	}
	for name, in := range map[string][]byte{
		"empty":        nil,
		"not PEM":      []byte("ed25519 key"),
		"certificate":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}}),
		"garbage body": pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2}}),
	} {
		if _, _, err := ParsePEMKeys(in); !errors.Is(err, ErrKeys) {
			t.Errorf("%s: err = %v, want ErrKeys", name, err)
		}
	}
}

func TestPublicKeysFile(t *testing.T) {
	a, b := fixedKey(1).Public().(ed25519.PublicKey), fixedKey(2).Public().(ed25519.PublicKey)
	got, err := ParsePublicKeys(FormatPublicKeys([]ed25519.PublicKey{a, b}))
	if err != nil || len(got) != 2 || !got[KeyID(a)].Equal(a) || !got[KeyID(b)].Equal(b) {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	line := "ed25519 " + strings.TrimPrefix(strings.Split(string(FormatPublicKeys([]ed25519.PublicKey{a})), "\n")[1], "ed25519 ")
	for name, in := range map[string]string{
		"other algorithm": "rsa " + line[8:],
		"short key":       "ed25519 AAAA",
		"not base64":      "ed25519 !!!!",
		"too many keys":   strings.Repeat(line+"\n", MaxPublicKeys+1),
		"too long":        strings.Repeat("#", MaxKeysFileLen+1),
	} {
		if _, err := ParsePublicKeys([]byte(in)); !errors.Is(err, ErrKeys) {
			t.Errorf("%s: err = %v, want ErrKeys", name, err)
		}
	}
}

// TestFileKeysReload: an unknown key id re-reads the file once the
// interval has passed; a known one never does. (Within the interval, a
// stat decides: filestamp_test.go.)
func TestFileKeysReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	a, b := fixedKey(1).Public().(ed25519.PublicKey), fixedKey(2).Public().(ed25519.PublicKey)
	k := NewFileKeys(path, time.Second)
	if _, err := k.Lookup(KeyID(a), t0); !errors.Is(err, ErrUnknownKey) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no file yet: %v", err)
	}
	if err := WritePublicKeys(path, []ed25519.PublicKey{a}); err != nil {
		t.Fatal(err)
	}
	if pub, err := k.Lookup(KeyID(a), t0.Add(time.Second)); err != nil || !pub.Equal(a) {
		t.Fatalf("after the interval: %v", err)
	}
	if err := WritePublicKeys(path, []ed25519.PublicKey{b}); err != nil {
		t.Fatal(err)
	}
	if pub, err := k.Lookup(KeyID(a), t0.Add(time.Second)); err != nil || !pub.Equal(a) {
		t.Fatalf("a known key id reads nothing: %v", err)
	}
	if pub, err := k.Lookup(KeyID(b), t0.Add(2*time.Second)); err != nil || !pub.Equal(b) {
		t.Fatalf("the rotated key: %v", err)
	}
	if _, err := k.Lookup(KeyID(a), t0.Add(3*time.Second)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("a key gone from the file is forgotten at the next read: %v", err)
	}
}

// TestFileKeysReloadDropsKey: Reload forgets a key id the file no longer
// holds, even one Lookup already knows; a file that is missing or does not
// parse keeps the keys of the last good read.
func TestFileKeysReloadDropsKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	a, b := fixedKey(1).Public().(ed25519.PublicKey), fixedKey(2).Public().(ed25519.PublicKey)
	if err := WritePublicKeys(path, []ed25519.PublicKey{a, b}); err != nil {
		t.Fatal(err)
	}
	k := NewFileKeys(path, time.Second)
	if pub, err := k.Lookup(KeyID(b), t0); err != nil || !pub.Equal(b) {
		t.Fatalf("before the drop: %v", err)
	}
	if err := WritePublicKeys(path, []ed25519.PublicKey{a}); err != nil {
		t.Fatal(err)
	}
	if err := k.Reload(t0); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Lookup(KeyID(b), t0); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("the dropped key after Reload: %v, want ErrUnknownKey", err)
	}
	if got := k.KeyIDs(); len(got) != 1 || got[0] != KeyID(a) {
		t.Fatalf("KeyIDs = %v, want only a's", got)
	}
	for name, broken := range map[string]func() error{
		"does not parse": func() error { return os.WriteFile(path, []byte("ed25519 not-a-key\n"), 0o644) },
		"missing":        func() error { return os.Remove(path) },
	} {
		if err := broken(); err != nil {
			t.Fatal(err)
		}
		if err := k.Reload(t0); err == nil {
			t.Errorf("%s: Reload = nil, want the read error", name)
		}
		if pub, err := k.Lookup(KeyID(a), t0); err != nil || !pub.Equal(a) {
			t.Errorf("%s: the last good key: %v", name, err)
		}
	}
}
