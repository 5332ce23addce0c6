package identitysig

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/atomicfile"
)

// The keys file: what extauthz publishes and the bridge trusts. One key a
// line, "ed25519 <standard base64 of the 32-byte public key>" or, for the
// per-start MAC key of an in-Pod extauthz, "hmac-sha256 <standard base64
// of the 32-byte key>"; blank lines and lines starting with # are ignored. At most MaxPublicKeys keys and
// MaxKeysFileLen bytes.
const (
	MaxPublicKeys  = 16
	MaxKeysFileLen = 4096
	keyLinePrefix  = "ed25519 "
	macLinePrefix  = "hmac-sha256 "
)

// ErrKeys is returned for a keys file or PEM that cannot be used, and
// ErrUnknownKey for a key id the bridge's keys file does not hold.
var (
	ErrKeys       = errors.New("identitysig: keys")
	ErrUnknownKey = errors.New("identitysig: unknown key id")
)

// ParsePublicKeys reads a public keys file's content (the bridge reads a
// file in a directory it shares with extauthz: bounded, strict). A MAC key
// line is an error here: ParseKeys reads both kinds.
func ParsePublicKeys(b []byte) (map[string]ed25519.PublicKey, error) {
	ks, err := parseKeys(b, false)
	return ks.Public, err
}

// KeySet is what a keys file holds: Ed25519 public keys and, written by
// an extauthz with a per-start key, its MAC key (mac.go), by key id.
type KeySet struct {
	Public map[string]ed25519.PublicKey
	MAC    map[string][]byte
}

// ParseKeys reads a keys file's content: "ed25519 <key>" and
// "hmac-sha256 <key>" lines, at most MaxPublicKeys keys in all.
func ParseKeys(b []byte) (KeySet, error) { return parseKeys(b, true) }

func parseKeys(b []byte, allowMAC bool) (KeySet, error) {
	if len(b) > MaxKeysFileLen {
		return KeySet{}, fmt.Errorf("%w: file over %d bytes", ErrKeys, MaxKeysFileLen)
	}
	ks := KeySet{Public: make(map[string]ed25519.PublicKey), MAC: make(map[string][]byte)}
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		raw, isPub := strings.CutPrefix(line, keyLinePrefix)
		if !isPub && allowMAC {
			var isMAC bool
			if raw, isMAC = strings.CutPrefix(line, macLinePrefix); !isMAC {
				raw = ""
			}
		}
		d, err := base64.StdEncoding.Strict().DecodeString(raw)
		if raw == "" || err != nil || len(d) != ed25519.PublicKeySize {
			return KeySet{}, fmt.Errorf("%w: line %d: want %q or %q and 32 bytes of standard base64", ErrKeys, i+1, keyLinePrefix, macLinePrefix)
		}
		if n++; n > MaxPublicKeys {
			return KeySet{}, fmt.Errorf("%w: over %d keys", ErrKeys, MaxPublicKeys)
		}
		if isPub {
			pub := ed25519.PublicKey(d)
			ks.Public[KeyID(pub)] = pub
		} else {
			ks.MAC[MACKeyID(d)] = d
		}
	}
	return ks, nil
}

// FormatPublicKeys renders keys as a public keys file.
func FormatPublicKeys(keys []ed25519.PublicKey) []byte { return FormatKeys(keys, nil) }

// FormatKeys renders public keys and, when mac is not nil, a MAC key as a
// keys file.
func FormatKeys(keys []ed25519.PublicKey, mac []byte) []byte {
	var b strings.Builder
	b.WriteString("# wirekube-extauthz identity signing keys (docs/revocation.md#signing)\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s%s\n", keyLinePrefix, base64.StdEncoding.EncodeToString(k))
	}
	if mac != nil {
		fmt.Fprintf(&b, "%s%s\n", macLinePrefix, base64.StdEncoding.EncodeToString(mac))
	}
	return []byte(b.String())
}

// WritePublicKeys writes keys to path atomically (a temporary file in the
// same directory, then a rename), mode 0644: they are public.
func WritePublicKeys(path string, keys []ed25519.PublicKey) error { return WriteKeys(path, keys, nil) }

// WriteKeys writes keys and mac (nil: none) to path atomically, mode 0644
// without a MAC key and 0640 with one: a MAC key is a secret, readable
// only by the Pod's user and group, like the revocation secret beside it.
func WriteKeys(path string, keys []ed25519.PublicKey, mac []byte) error {
	n := len(keys)
	if mac != nil {
		n++
		if len(mac) != MACKeyLen {
			return fmt.Errorf("%w: MAC key of %d bytes, want %d", ErrKeys, len(mac), MACKeyLen)
		}
	}
	if n == 0 || n > MaxPublicKeys {
		return fmt.Errorf("%w: want 1 to %d keys, got %d", ErrKeys, MaxPublicKeys, n)
	}
	mode := os.FileMode(0o644)
	if mac != nil {
		mode = 0o640
	}
	if err := atomicfile.Write(path, ".identity-keys-*", FormatKeys(keys, mac), mode); err != nil {
		return fmt.Errorf("identity keys: %w", err)
	}
	return nil
}

// ParsePEMKeys reads PEM blocks of Ed25519 keys: "PRIVATE KEY" (PKCS #8,
// what `openssl genpkey -algorithm ed25519` and Helm's genPrivateKey
// "ed25519" write) and "PUBLIC KEY" (PKIX, `openssl pkey -pubout`). It
// returns the private keys in file order and the public half of every key.
func ParsePEMKeys(b []byte) (privs []ed25519.PrivateKey, pubs []ed25519.PublicKey, err error) {
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		var k any
		switch blk.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "PUBLIC KEY":
			k, err = x509.ParsePKIXPublicKey(blk.Bytes)
		default:
			return nil, nil, fmt.Errorf("%w: PEM block %q, want PRIVATE KEY or PUBLIC KEY", ErrKeys, blk.Type)
		}
		switch k := k.(type) {
		case ed25519.PrivateKey:
			privs, pubs = append(privs, k), append(pubs, k.Public().(ed25519.PublicKey))
		case ed25519.PublicKey:
			pubs = append(pubs, k)
		default:
			return nil, nil, fmt.Errorf("%w: a %s block that is no Ed25519 key: %v", ErrKeys, blk.Type, err)
		}
	}
	if len(pubs) == 0 {
		return nil, nil, fmt.Errorf("%w: no PEM key block", ErrKeys)
	}
	return privs, pubs, nil
}

// ReadFileBounded reads at most limit bytes of path; a longer file is an
// error.
func ReadFileBounded(path string, limit int64) ([]byte, error) {
	b, _, err := readStamped(os.Open, path, limit)
	return b, err
}

// FileKeys are the public keys of a keys file. Reload re-reads it (the
// bridge calls it on a timer, so that a key dropped from the file stops
// verifying); Lookup also re-reads it when a signature names a key id it
// does not hold: at once when minReload has passed since the last read, and
// within minReload only when a stat of the file shows it changed since
// (another file, size or modification time), so a key extauthz publishes is
// trusted on the first request that names it. An unknown key id thus costs
// at most one stat, and re-reads at most one per minReload plus one per
// change of the file: random key ids cannot make it read an unchanged file
// more than once per minReload. Safe for concurrent use.
type FileKeys struct {
	path      string
	minReload time.Duration
	open      func(string) (*os.File, error) // os.Open; tests count reads
	stat      func(string) (fs.FileInfo, error)

	mu          sync.Mutex
	keys        KeySet
	stamp       fileStamp // of the file the last read attempt saw
	loaded      time.Time // last read attempt; zero: never
	err         error     // of the last read attempt
	lookupReads uint64    // reads prompted by an unknown key id
}

// NewFileKeys returns the keys of path, read at the first Lookup or Reload.
func NewFileKeys(path string, minReload time.Duration) *FileKeys {
	return &FileKeys{path: path, minReload: minReload, open: os.Open, stat: os.Stat}
}

// Lookup returns the key of kid. The error of an unknown id wraps
// ErrUnknownKey and, when the last read failed, its error.
func (k *FileKeys) Lookup(kid string, now time.Time) (ed25519.PublicKey, error) {
	return lookupIn(k, kid, now, func(ks KeySet) map[string]ed25519.PublicKey { return ks.Public })
}

// LookupMAC is Lookup for a MAC key.
func (k *FileKeys) LookupMAC(kid string, now time.Time) ([]byte, error) {
	return lookupIn(k, kid, now, func(ks KeySet) map[string][]byte { return ks.MAC })
}

// lookupIn holds k.mu across the re-read it may make: of many lookups of
// unknown ids at once, one reads and the others find its stamp.
func lookupIn[V any](k *FileKeys, kid string, now time.Time, of func(KeySet) map[string]V) (V, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v, ok := of(k.keys)[kid]; ok {
		return v, nil
	}
	if k.mayHaveChanged(now) {
		k.lookupReads++
		k.store(k.read(), now)
		if v, ok := of(k.keys)[kid]; ok {
			return v, nil
		}
	}
	var zero V
	if k.err != nil {
		return zero, fmt.Errorf("%w (reading %s: %w)", ErrUnknownKey, k.path, k.err)
	}
	return zero, ErrUnknownKey
}

// mayHaveChanged reports whether an unknown key id re-reads the file (k.mu
// held): never read, minReload passed since the last read, or a stat (links
// followed, as the read opens it) showing another file than the last read
// saw. A stat that fails reads nothing: there is nothing to read.
func (k *FileKeys) mayHaveChanged(now time.Time) bool {
	if k.loaded.IsZero() || now.Sub(k.loaded) >= k.minReload {
		return true
	}
	fi, err := k.stat(k.path)
	return err == nil && !k.stamp.matches(fi)
}

// LookupReads returns how many times Lookup and LookupMAC re-read the file
// for an unknown key id.
func (k *FileKeys) LookupReads() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lookupReads
}

// Reload re-reads the file now: a key the file no longer holds stops
// verifying. A file that cannot be read or does not parse keeps the keys of
// the last good read, and the error is returned. Keeping them is the safe
// side of two failures: the writer (extauthz) replaces the file atomically,
// so a failed read is a missing or broken file, never one caught mid-write,
// and dropping every key would refuse every upgrade; a key leaves only by a
// good read that lacks it.
func (k *FileKeys) Reload(now time.Time) error {
	r := k.read() // outside the lock: Lookup does not wait on the disk
	k.mu.Lock()
	defer k.mu.Unlock()
	k.store(r, now)
	return r.err
}

// KeyIDs returns the ids of the keys held, sorted.
func (k *FileKeys) KeyIDs() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	ids := append(slices.Collect(maps.Keys(k.keys.Public)), slices.Collect(maps.Keys(k.keys.MAC))...)
	slices.Sort(ids)
	return ids
}

// readResult is one read of the file: its keys, or the error, and the
// stamp of the file read.
type readResult struct {
	keys  KeySet
	stamp fileStamp
	err   error
}

func (k *FileKeys) read() readResult {
	b, stamp, err := readStamped(k.open, k.path, MaxKeysFileLen)
	if stamp.info == nil && err != nil {
		// Not opened (a file the bridge may not read): stamp the path, so
		// that unknown key ids do not retry it until it changes.
		if fi, serr := k.stat(k.path); serr == nil {
			stamp.info = fi
		}
	}
	if err != nil {
		return readResult{stamp: stamp, err: err}
	}
	keys, err := ParseKeys(b)
	return readResult{keys: keys, stamp: stamp, err: err}
}

// store records a read (k.mu held): its keys replace the old ones unless it
// failed. The stamp is kept either way: a file that does not parse is not
// re-read for an unknown key id until it changes.
func (k *FileKeys) store(r readResult, now time.Time) {
	k.loaded, k.err, k.stamp = now, r.err, r.stamp
	if r.err == nil {
		k.keys = r.keys
	}
}
