package relayproto

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	k := key(1)
	good := base64.StdEncoding.EncodeToString(k[:])
	for _, tc := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"valid", good, true},
		{"empty", "", false},
		{"31 bytes", base64.StdEncoding.EncodeToString(k[:31]), false},
		{"33 bytes", base64.StdEncoding.EncodeToString(append(k[:], 0)), false},
		{"unpadded", strings.TrimRight(good, "="), false},
		{"url alphabet", base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32)), false},
		{"not base64", strings.Repeat("!", 44), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseKey(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseKey(%q) err = %v, want ok=%v", tc.in, err, tc.ok)
			}
			if tc.ok && (got != k || got.Base64() != tc.in) {
				t.Fatalf("round trip: %x", got)
			}
		})
	}
}

func TestKeyNeverPrintsWholeKey(t *testing.T) {
	k := key(9)
	for _, s := range []string{k.String(), k.Fingerprint()} {
		if len(s) != 8 || strings.Contains(k.Base64(), s) {
			t.Fatalf("fingerprint %q leaks the key or has the wrong size", s)
		}
	}
	if !k.Equal(key(9)) || k.Equal(key(10)) {
		t.Fatal("Equal is wrong")
	}
}

func TestRegisterAndData(t *testing.T) {
	k := key(3)
	f, err := ReadFrame(bytes.NewReader(AppendRegister(nil, k)), nil)
	if err != nil || f.Type != TypeRegister {
		t.Fatalf("register frame: %v", err)
	}
	if got, err := ParseRegister(f.Body); err != nil || got != k {
		t.Fatalf("ParseRegister = %v, %v", got, err)
	}
	if _, err := ParseRegister(f.Body[:31]); !errors.Is(err, ErrKeySize) {
		t.Fatalf("short register: %v", err)
	}

	f, err = ReadFrame(bytes.NewReader(AppendData(nil, k, []byte("payload"))), nil)
	if err != nil || f.Type != TypeData {
		t.Fatalf("data frame: %v", err)
	}
	dst, payload, err := ParseData(f.Body)
	if err != nil || dst != k || string(payload) != "payload" {
		t.Fatalf("ParseData = %v %q %v", dst, payload, err)
	}
	if _, _, err := ParseData(make([]byte, 31)); !errors.Is(err, ErrDataBody) {
		t.Fatalf("short data: %v", err)
	}
}
