package revocation

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func sampleBinding() Binding {
	return Binding{
		Identity: "system:serviceaccount:wirekube-system:wirekube-agent", SAUID: "6c1b0d0e-7a1e-4e55-9d43-0a9d2b8f6a11",
		PodName: "wirekube-agent-x7k2p", PodUID: "0f3c2a9e-4b7d-4c11-8e0a-3d5f6a7b8c9d",
		NodeName: "node-a", NodeUID: "7d2e9c1b-1a2b-4c3d-9e8f-001122334455",
		Peer: "node-a", KeySHA256: KeyHash([]byte("0123456789abcdef0123456789abcdef")),
	}
}

func TestBindingRoundTrip(t *testing.T) {
	for _, b := range []Binding{
		sampleBinding(),
		{Identity: "system:serviceaccount:wirekube-system:wirekube-relay-peer-gw", SAUID: "u", Peer: "gw"},
		{Identity: "system:serviceaccount:ns:agent", SAUID: "u", NodeName: "n", NodeUID: "nu", Peer: "n"},
	} {
		s := b.Format()
		got, err := ParseBinding(s)
		if err != nil || got != b {
			t.Fatalf("ParseBinding(%q) = %+v, %v; want %+v", s, got, err, b)
		}
		if len(s) > MaxBindingLen {
			t.Fatalf("%d bytes", len(s))
		}
	}
}

func TestParseBindingRejects(t *testing.T) {
	good := sampleBinding().Format()
	keyHex := good[strings.LastIndex(good, "key=")+4:]
	for _, tc := range []struct{ name, in string }{
		{"empty", ""},
		{"other version", strings.Replace(good, "v1;", "v2;", 1)},
		{"missing field", strings.Replace(good, ";peer=node-a", "", 1)},
		{"extra field", good + ";x=y"},
		{"reordered", strings.Replace(strings.Replace(good, "sa=", "XX=", 1), "sauid=", "sa=", 1)},
		{"space", strings.Replace(good, "node-a", "node a", 1)},
		{"semicolon in value", strings.Replace(good, "pod=", "pod=a;", 1)},
		{"no identity", strings.Replace(good, "sa=system:serviceaccount:wirekube-system:wirekube-agent", "sa=", 1)},
		{"no peer", strings.Replace(good, "peer=node-a", "peer=", 1)},
		{"pod without uid", strings.Replace(good, "poduid=0f3c2a9e-4b7d-4c11-8e0a-3d5f6a7b8c9d", "poduid=", 1)},
		{"short key", strings.Replace(good, keyHex, keyHex[:62], 1)},
		{"upper-case key", strings.Replace(good, keyHex, strings.ToUpper(keyHex), 1)},
		{"too long", good + strings.Repeat("a", MaxBindingLen)},
		{"field too long", strings.Replace(good, "pod=", "pod="+strings.Repeat("a", 400), 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseBinding(tc.in); !errors.Is(err, ErrBinding) {
				t.Fatalf("ParseBinding = %v, want ErrBinding", err)
			}
		})
	}
}

func sampleOps() []Op {
	return []Op{
		{Kind: KindAdd, ID: 1, Binding: sampleBinding().Format()},
		{Kind: KindRemove, ID: 2},
		{Kind: KindSynced, ID: 7},
		{Kind: KindRevoke, ID: 3, Reason: "pod_not_found", EventUnixNano: 1764581000123456789},
		{Kind: KindSyncedAck, ID: 7},
	}
}

func TestMessageRoundTrip(t *testing.T) {
	ops := sampleOps()
	got, err := Decode(Encode(nil, ops))
	if err != nil || !reflect.DeepEqual(got, ops) {
		t.Fatalf("Decode = %+v, %v; want %+v", got, err, ops)
	}
	if got, err := Decode(Encode(nil, nil)); err != nil || len(got) != 0 {
		t.Fatalf("empty message: %v, %v", got, err)
	}
}

func TestDecodeRejects(t *testing.T) {
	good := Encode(nil, sampleOps())
	revoke := Encode(nil, []Op{{Kind: KindRevoke, ID: 1, Reason: "x"}})
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"other version", append([]byte{2}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"count too high", []byte{1, 0xff, 0xff}},
		{"count beyond data", []byte{1, 0, 2, byte(KindRemove), 0, 0, 0, 0, 0, 0, 0, 1}},
		{"unknown kind", []byte{1, 0, 1, 0x42, 0, 0, 0, 0, 0, 0, 0, 1}},
		{"binding length beyond data", []byte{1, 0, 1, byte(KindAdd), 0, 0, 0, 0, 0, 0, 0, 1, 0, 9, 'a'}},
		{"empty reason", Encode(nil, []Op{{Kind: KindRevoke, ID: 1}})},
		{"reason not a code", append(revoke[:len(revoke)-1], 'X')},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Decode(tc.in); !errors.Is(err, ErrMessage) {
				t.Fatalf("Decode = %v, want ErrMessage", err)
			}
		})
	}
}

func TestBatches(t *testing.T) {
	ops := make([]Op, 0, 3*MaxOps)
	for i := range 3 * MaxOps {
		ops = append(ops, Op{Kind: KindAdd, ID: uint64(i), Binding: strings.Repeat("b", 1500)})
	}
	var n int
	for _, b := range Batches(ops) {
		if len(b) == 0 || len(b) > MaxOps || len(Encode(nil, b)) > MaxMessage {
			t.Fatalf("batch of %d ops, %d bytes", len(b), len(Encode(nil, b)))
		}
		n += len(b)
	}
	if n != len(ops) {
		t.Fatalf("batches hold %d ops, want %d", n, len(ops))
	}
}

func TestKindDirections(t *testing.T) {
	for _, k := range []Kind{KindAdd, KindRemove, KindSynced} {
		if !k.FromBridge() || k.FromExtauthz() {
			t.Errorf("%#x", byte(k))
		}
	}
	for _, k := range []Kind{KindRevoke, KindSyncedAck} {
		if k.FromBridge() || !k.FromExtauthz() {
			t.Errorf("%#x", byte(k))
		}
	}
}
