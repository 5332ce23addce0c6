package bridge

import (
	"bytes"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// FuzzParseIdentity: whatever the header values, parseIdentity either fails
// with ErrIdentityHeader or returns exactly what the headers said.
func FuzzParseIdentity(f *testing.F) {
	f.Add("node-a", testKey(1).Base64(), "system:serviceaccount:ns:sa", "2030-01-02T03:04:05Z")
	f.Add("", "AAAA", "a b", "1700000000")
	f.Add("n", "-_-_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "x\x00", "2030-01-02T03:04:05+02:00")
	f.Fuzz(func(t *testing.T, peer, key, subject, expires string) {
		h := http.Header{}
		h.Set(contract.HeaderPeer, peer)
		h.Set(contract.HeaderPublicKey, key)
		h.Set(contract.HeaderIdentity, subject)
		h.Set(contract.HeaderTokenExpires, expires)
		id, err := parseIdentity(h)
		if err != nil {
			if !errors.Is(err, ErrIdentityHeader) {
				t.Fatalf("error %v is not ErrIdentityHeader", err)
			}
			return
		}
		exp, perr := time.Parse(time.RFC3339, expires)
		raw, kerr := base64.StdEncoding.DecodeString(key)
		if id.Peer != peer || id.Subject != subject || kerr != nil || !bytes.Equal(raw, id.Key[:]) ||
			perr != nil || !exp.Equal(id.TokenExpires) {
			t.Fatalf("parsed %+v from %q %q %q %q", id, peer, key, subject, expires)
		}
	})
}

// FuzzWholeFrames: the prefix wholeFrames picks from relay bytes is a run of
// whole frames within the coalescing bound (or one frame alone).
func FuzzWholeFrames(f *testing.F) {
	f.Add(dataFrame(testKey(1), 1, 100), 200)
	f.Add(append(dataFrame(testKey(1), 1, 100), rawHeader(0, 2)...), 50)
	f.Add(rawHeader(relayproto.MaxFrameSize+1, 2), 10)
	f.Fuzz(func(t *testing.T, p []byte, limit int) {
		if limit < 0 || limit > 1<<20 {
			return
		}
		end, err := wholeFrames(p, limit)
		if err != nil {
			return
		}
		r := bytes.NewReader(p[:end])
		frames := 0
		for r.Len() > 0 {
			if _, err := relayproto.ReadFrame(r, nil); err != nil {
				t.Fatalf("prefix of %d bytes is not whole frames: %v", end, err)
			}
			frames++
		}
		if end > limit && frames > 1 {
			t.Fatalf("%d frames in %d bytes, over the limit %d", frames, end, limit)
		}
	})
}
