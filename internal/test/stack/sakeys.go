package stack

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Flags of kube-apiserver naming the ServiceAccount token keys.
const (
	flagSAKeyFile     = "--service-account-key-file="
	flagSASigningFile = "--service-account-signing-key-file="
)

// KeyID is the kid kube-apiserver puts in the tokens a key signs and in its
// JWKS: base64url of the SHA-256 of the public key's PKIX DER.
func KeyID(pub *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("key id: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}

// RotateSAKey restarts kube-apiserver signing ServiceAccount tokens with a
// fresh key while it still verifies (and publishes in its JWKS) every key it
// had: tokens of the old keys stay valid. SAKey becomes the new key.
func (c *Cluster) RotateSAKey(ctx context.Context) error {
	dir := filepath.Join(c.Dir, "sa-"+strconv.Itoa(len(c.saPubFiles())+1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sa key dir: %w", err)
	}
	key, priv, pub, err := writeSAKeys(dir)
	if err != nil {
		return err
	}
	pubs := append(c.saPubFiles(), pub)
	if err := c.restartWithSAKeys(ctx, priv, pubs); err != nil {
		return err
	}
	c.SAKey = key
	return nil
}

// DropOldSAKeys restarts kube-apiserver verifying only its signing key:
// tokens of every earlier key stop being valid, and its JWKS lists one key.
func (c *Cluster) DropOldSAKeys(ctx context.Context) error {
	priv := c.saSigningFile()
	pub := filepath.Join(filepath.Dir(priv), "sa.pub")
	return c.restartWithSAKeys(ctx, priv, []string{pub})
}

func (c *Cluster) restartWithSAKeys(ctx context.Context, priv string, pubs []string) error {
	var args []string
	for _, a := range c.apiserverArgs {
		if !strings.HasPrefix(a, flagSAKeyFile) && !strings.HasPrefix(a, flagSASigningFile) {
			args = append(args, a)
		}
	}
	for _, p := range pubs {
		args = append(args, flagSAKeyFile+p)
	}
	args = append(args, flagSASigningFile+priv)
	if err := c.StopAPIServer(); err != nil {
		return err
	}
	c.apiserverArgs = args
	return c.StartAPIServer(ctx)
}

func (c *Cluster) saPubFiles() []string {
	var out []string
	for _, a := range c.apiserverArgs {
		if p, ok := strings.CutPrefix(a, flagSAKeyFile); ok {
			out = append(out, p)
		}
	}
	return out
}

func (c *Cluster) saSigningFile() string {
	for _, a := range c.apiserverArgs {
		if p, ok := strings.CutPrefix(a, flagSASigningFile); ok {
			return p
		}
	}
	return ""
}
