package revocation

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestSecretFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret")
	s := NewSecret()
	if err := WriteSecretFile(path, s); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSecretFile(path)
	if err != nil || got != s {
		t.Fatalf("ReadSecretFile = %q, %v; want what was written", got, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v; want 0640", fi.Mode(), err)
	}
	md, err := SecretCredentials{Path: path}.GetRequestMetadata(context.Background())
	if err != nil || md[SecretMetadataKey] != s {
		t.Fatalf("credentials = %v, %v", md, err)
	}
}

func TestReadSecretFileRejects(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"empty": "", "not hex": "zz", "short": "00ff",
		"long": "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff00",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := ReadSecretFile(path); !errors.Is(err, ErrSecret) {
				t.Fatalf("ReadSecretFile = %v, want ErrSecret", err)
			}
		})
	}
	if _, err := ReadSecretFile(filepath.Join(dir, "absent")); !errors.Is(err, ErrSecret) {
		t.Fatalf("absent file: %v, want ErrSecret", err)
	}
}

func TestCheckSecret(t *testing.T) {
	want := NewSecret()
	for _, tc := range []struct {
		name string
		md   metadata.MD
		ok   bool
	}{
		{"right secret", metadata.Pairs(SecretMetadataKey, want), true},
		{"no metadata", nil, false},
		{"wrong secret", metadata.Pairs(SecretMetadataKey, NewSecret()), false},
		{"repeated", metadata.Pairs(SecretMetadataKey, want, SecretMetadataKey, want), false},
		{"other key", metadata.Pairs("authorization", want), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			if tc.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tc.md)
			}
			err := CheckSecret(ctx, want)
			if tc.ok != (err == nil) || (err != nil && status.Code(err) != codes.Unauthenticated) {
				t.Fatalf("CheckSecret = %v, want ok=%v or Unauthenticated", err, tc.ok)
			}
		})
	}
}
