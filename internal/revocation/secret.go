package revocation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/wirekube/relay-ws/internal/atomicfile"
)

// The bridge proves it is the bridge of this Pod with a secret extauthz
// makes at every start and writes to a file in the directory the two
// containers share (docs/revocation.md, "Who may watch"). Every Watch call
// carries it in this metadata key. The secret never appears in a log line
// or a metric.
const SecretMetadataKey = "x-wirekube-revocation-secret"

// secretLen is the secret's length in bytes (hex-encoded in the file).
const secretLen = 32

// ErrSecret is returned for a missing, unreadable or malformed secret file.
var ErrSecret = errors.New("revocation: secret file")

// NewSecret returns a fresh random secret in its file form (hex).
func NewSecret() string {
	b := make([]byte, secretLen)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// WriteSecretFile writes secret to path atomically (a temporary file in the
// same directory, then a rename), readable by the owner and the group
// (the Pod's fsGroup) only.
func WriteSecretFile(path, secret string) error {
	if err := atomicfile.Write(path, ".revocation-secret-*", []byte(secret+"\n"), 0o640); err != nil {
		return fmt.Errorf("revocation secret: %w", err)
	}
	return nil
}

// ReadSecretFile reads the secret at path (whitespace trimmed); anything
// but 64 hex characters is ErrSecret.
func ReadSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSecret, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4*secretLen))
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSecret, err)
	}
	s := strings.TrimSpace(string(b))
	if d, err := hex.DecodeString(s); err != nil || len(d) != secretLen {
		return "", fmt.Errorf("%w: %s holds no %d-byte hex secret", ErrSecret, path, secretLen)
	}
	return s, nil
}

// CheckSecret reports whether the incoming call of ctx carries want, once.
// It compares SHA-256 digests in constant time. The answer to a caller
// without it is codes.Unauthenticated, saying nothing more.
func CheckSecret(ctx context.Context, want string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	got := md.Get(SecretMetadataKey)
	wantSum := sha256.Sum256([]byte(want))
	if len(got) == 1 {
		gotSum := sha256.Sum256([]byte(got[0]))
		if subtle.ConstantTimeCompare(gotSum[:], wantSum[:]) == 1 {
			return nil
		}
	}
	return status.Error(codes.Unauthenticated, "revocation: secret missing or wrong")
}

// SecretCredentials are the bridge's per-call credentials: the secret file
// is read at every call, so a restarted extauthz's new secret is picked up
// on the next (re)connect.
type SecretCredentials struct{ Path string }

var _ credentials.PerRPCCredentials = SecretCredentials{}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (c SecretCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	s, err := ReadSecretFile(c.Path)
	if err != nil {
		return nil, err
	}
	return map[string]string{SecretMetadataKey: s}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the
// stream runs on a Unix socket or loopback inside the Pod, without TLS.
func (SecretCredentials) RequireTransportSecurity() bool { return false }
