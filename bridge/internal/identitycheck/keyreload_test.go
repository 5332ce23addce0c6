package identitycheck

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/identitysig"
	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// TestDroppedKeyRefusedAfterReload: a key dropped from the keys file stops
// verifying at the next periodic re-read, with no request prompting it,
// while the key still in the file keeps verifying; a file that stops
// parsing keeps the keys of the last good read, counted and logged.
func TestDroppedKeyRefusedAfterReload(t *testing.T) {
	kept, dropped := testutil.SigningKey(1), testutil.SigningKey(2)
	path := testutil.PublishKeys(t, kept, dropped)
	synctest.Test(t, func(t *testing.T) {
		o := testOptions(path)
		logs, reg := &testutil.SyncBuffer{}, prometheus.NewRegistry()
		c, verify := reloadingCheck(t, o, logs, reg)
		if r := verify(dropped); r != "" {
			t.Fatalf("before the drop: %q, want admitted", r)
		}
		if err := identitysig.WritePublicKeys(path, []ed25519.PublicKey{kept.Public().(ed25519.PublicKey)}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); c.Run(ctx) }()
		time.Sleep(o.reload.IdentityKeysReloadInterval)
		synctest.Wait()
		if r := verify(dropped); r != contract.ReasonIdentitySignatureInvalid {
			t.Errorf("one interval after the drop: %q, want %q", r, contract.ReasonIdentitySignatureInvalid)
		}
		if r := verify(kept); r != "" {
			t.Errorf("the kept key: %q, want admitted", r)
		}
		if err := os.WriteFile(path, []byte("ed25519 broken\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(o.reload.IdentityKeysReloadInterval)
		synctest.Wait()
		if r := verify(kept); r != "" {
			t.Errorf("after a bad re-read: %q, want the last good keys", r)
		}
		if n := promtest.ToFloat64(c.keys.errors); n != 1 {
			t.Errorf("reload errors = %v, want 1", n)
		}
		testutil.Contains(t, logs.String(), "identity keys file not re-read")
		cancel()
		<-done
	})
}

// TestPublishedKeyAdmittedAtOnce: a key published to the keys file is
// trusted by the first signature naming it, with no time passing since the
// bridge's last read; signatures by a key never published re-read nothing.
// Both show in wirekube_bridge_identity_keys_lookup_reads_total.
func TestPublishedKeyAdmittedAtOnce(t *testing.T) {
	first, published, stranger := testutil.SigningKey(1), testutil.SigningKey(2), testutil.SigningKey(3)
	path := testutil.PublishKeys(t, first)
	synctest.Test(t, func(t *testing.T) {
		o := testOptions(path)
		reg := prometheus.NewRegistry()
		c, verify := reloadingCheck(t, o, &testutil.SyncBuffer{}, reg)
		if r := verify(first); r != "" {
			t.Fatalf("the first key: %q, want admitted", r)
		}
		if err := identitysig.WritePublicKeys(path, []ed25519.PublicKey{first.Public().(ed25519.PublicKey),
			published.Public().(ed25519.PublicKey)}); err != nil {
			t.Fatal(err)
		}
		if r := verify(published); r != "" {
			t.Fatalf("a key published after the last read, no time passed: %q, want admitted", r)
		}
		for range 50 {
			if r := verify(stranger); r != contract.ReasonIdentitySignatureInvalid {
				t.Fatalf("a key never published: %q, want %q", r, contract.ReasonIdentitySignatureInvalid)
			}
		}
		if n := promtest.ToFloat64(c.keys.lookupReads); n != 2 {
			t.Errorf("lookup reads = %v, want 2 (the first read and the published key's)", n)
		}
	})
}

// options are the two option sets New takes.
type options struct {
	sig    SignatureOptions
	reload KeysReloadOptions
}

// testOptions are the defaults with the keys file at path, re-read every
// 10 s.
func testOptions(path string) options {
	o := options{sig: DefaultSignatureOptions(), reload: KeysReloadOptions{IdentityKeysReloadInterval: 10 * time.Second}}
	o.sig.IdentityKeysFile = path
	return o
}

// identityHeaders are the identity headers of one agent, as a front
// forwards them from extauthz's answer.
func identityHeaders() http.Header {
	h := http.Header{}
	h.Set(contract.HeaderPeer, "node-a")
	h.Set(contract.HeaderPublicKey, "AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=")
	h.Set(contract.HeaderIdentity, "system:serviceaccount:wirekube-system:wirekube-agent")
	h.Set(contract.HeaderTokenExpires, "2030-01-02T03:04:05Z")
	return h
}

// reloadingCheck builds the check (its key reloader included) for o, and
// returns what Check then Spend answer for identity headers signed by a
// key ("" when admitted).
func reloadingCheck(t *testing.T, o options, logs *testutil.SyncBuffer, reg *prometheus.Registry) (*Checker, func(ed25519.PrivateKey) contract.Reason) {
	t.Helper()
	c, err := New(o.sig, o.reload, slog.New(slog.NewJSONHandler(logs, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	return c, func(key ed25519.PrivateKey) contract.Reason {
		h := testutil.SignHeaders(identityHeaders(), key, time.Now())
		ok, r, _ := c.Check(h, h.Get(contract.HeaderPeer), h.Get(contract.HeaderIdentity), "")
		if r != "" {
			return r
		}
		r, _ = c.Spend(ok, h.Get(contract.HeaderPeer))
		return r
	}
}
