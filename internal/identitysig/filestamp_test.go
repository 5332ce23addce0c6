package identitysig

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// countFileCalls makes k count the times it opens and stats its file.
func countFileCalls(k *FileKeys) (opens, stats *int) {
	opens, stats = new(int), new(int)
	open, stat := k.open, k.stat
	k.open = func(p string) (*os.File, error) { *opens++; return open(p) }
	k.stat = func(p string) (fs.FileInfo, error) { *stats++; return stat(p) }
	return opens, stats
}

func publicKey(b byte) ed25519.PublicKey { return fixedKey(b).Public().(ed25519.PublicKey) }

// TestFileKeysTrustsAKeyPublishedWithinMinReload: a key written to the file
// (renamed over it, as extauthz publishes) a millisecond after the last
// read is found by the first Lookup that names it, an Ed25519 key and a
// per-start MAC key alike.
func TestFileKeysTrustsAKeyPublishedWithinMinReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	a, b, mac := publicKey(1), publicKey(2), fixedMACKey(3)
	if err := WritePublicKeys(path, []ed25519.PublicKey{a}); err != nil {
		t.Fatal(err)
	}
	k := NewFileKeys(path, time.Second)
	if _, err := k.Lookup(KeyID(a), t0); err != nil {
		t.Fatal(err)
	}
	if err := WritePublicKeys(path, []ed25519.PublicKey{a, b}); err != nil {
		t.Fatal(err)
	}
	if pub, err := k.Lookup(KeyID(b), t0.Add(time.Millisecond)); err != nil || !pub.Equal(b) {
		t.Fatalf("an Ed25519 key published 1ms after the last read: %v, want it trusted", err)
	}
	if err := WriteKeys(path, nil, mac); err != nil {
		t.Fatal(err)
	}
	if got, err := k.LookupMAC(MACKeyID(mac), t0.Add(2*time.Millisecond)); err != nil || string(got) != string(mac) {
		t.Fatalf("a MAC key published 2ms after the first read: %v, want it trusted", err)
	}
}

// TestFileKeysFollowsASwappedDataLink: a Secret or ConfigMap volume
// publishes by swapping its ..data link; an unknown key id does not re-read
// the file behind unchanged links, and a key published by a swap within
// minReload is found even when the new file has the old one's size and
// modification time (only the file behind the links differs).
func TestFileKeysFollowsASwappedDataLink(t *testing.T) {
	dir := t.TempDir()
	a, b := publicKey(1), publicKey(2)
	mtime := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for name, key := range map[string]ed25519.PublicKey{"..v1": a, "..v2": b} {
		file := filepath.Join(dir, name, "keys")
		if err := os.Mkdir(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WritePublicKeys(file, []ed25519.PublicKey{key}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name+".tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, name+".tmp"), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("..v1", "..data")
	link("..data/keys", "keys")
	k := NewFileKeys(filepath.Join(dir, "keys"), time.Second)
	opens, _ := countFileCalls(k)
	if _, err := k.Lookup(KeyID(a), t0); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Lookup(KeyID(b), t0.Add(time.Millisecond)); !errors.Is(err, ErrUnknownKey) || *opens != 1 {
		t.Fatalf("an unknown key id behind unchanged links: %v after %d reads, want ErrUnknownKey after 1", err, *opens)
	}
	link("..v2", "..data")
	if pub, err := k.Lookup(KeyID(b), t0.Add(2*time.Millisecond)); err != nil || !pub.Equal(b) {
		t.Fatalf("a key published by a ..data swap 2ms after the last read: %v, want it trusted", err)
	}
}

// TestFileKeysUnknownIDsDoNotReReadAnUnchangedFile: random key ids within
// minReload of the last read cost one stat each and no read of the
// unchanged file; once minReload has passed, one of them reads it once.
func TestFileKeysUnknownIDsDoNotReReadAnUnchangedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := WritePublicKeys(path, []ed25519.PublicKey{publicKey(1)}); err != nil {
		t.Fatal(err)
	}
	k := NewFileKeys(path, time.Second)
	opens, stats := countFileCalls(k)
	randomID := func() string {
		b := make([]byte, ed25519.PublicKeySize)
		rand.Read(b)
		return KeyID(ed25519.PublicKey(b))
	}
	const n = 1000
	lookup := func(at time.Time) {
		t.Helper()
		if _, err := k.Lookup(randomID(), at); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("a random key id: %v, want ErrUnknownKey", err)
		}
	}
	lookup(t0) // the first read
	for i := range n {
		lookup(t0.Add(time.Duration(i+1) * 900 * time.Microsecond))
	}
	if *opens != 1 || *stats != n {
		t.Fatalf("%d random ids within minReload: %d reads, %d stats; want the first read only and %d stats", n, *opens, *stats, n)
	}
	lookup(t0.Add(time.Second))
	lookup(t0.Add(time.Second + time.Millisecond))
	if *opens != 2 || k.LookupReads() != 2 {
		t.Fatalf("after minReload: %d reads (%d counted), want 2", *opens, k.LookupReads())
	}
}

// TestFileKeysUnknownIDsDoNotReReadABrokenUnchangedFile: a file that does
// not parse is read once, and not again within minReload until it changes.
func TestFileKeysUnknownIDsDoNotReReadABrokenUnchangedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("ed25519 broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	k := NewFileKeys(path, time.Second)
	opens, _ := countFileCalls(k)
	for i := range 10 {
		if _, err := k.Lookup(KeyID(publicKey(1)), t0.Add(time.Duration(i)*time.Millisecond)); !errors.Is(err, ErrKeys) {
			t.Fatalf("lookup %d: %v, want the parse error", i, err)
		}
	}
	if *opens != 1 {
		t.Fatalf("10 lookups of a broken unchanged file: %d reads, want 1", *opens)
	}
}
