package revocation

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wirekube/relay-ws/internal/revocation/revocationpb"
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

// pipe is a Stream whose SendMsg hands the message, marshalled, to RecvMsg.
type pipe struct{ msgs [][]byte }

func (p *pipe) SendMsg(m any) error {
	b, err := proto.Marshal(m.(proto.Message))
	p.msgs = append(p.msgs, b)
	return err
}

func (p *pipe) RecvMsg(m any) error {
	b := p.msgs[0]
	p.msgs = p.msgs[1:]
	return proto.Unmarshal(b, m.(proto.Message))
}

func TestMessageRoundTrip(t *testing.T) {
	ops := sampleOps()
	var p pipe
	if err := Send(&p, ops[:3]); err != nil {
		t.Fatal(err)
	}
	if err := Send(&p, ops[3:]); err != nil {
		t.Fatal(err)
	}
	got, err := RecvFromBridge(&p)
	if err != nil || !reflect.DeepEqual(got, ops[:3]) {
		t.Fatalf("RecvFromBridge = %+v, %v; want %+v", got, err, ops[:3])
	}
	got, err = RecvFromExtauthz(&p)
	if err != nil || !reflect.DeepEqual(got, ops[3:]) {
		t.Fatalf("RecvFromExtauthz = %+v, %v; want %+v", got, err, ops[3:])
	}
}

func TestFromBridgeRejects(t *testing.T) {
	add := func(b string) *revocationpb.BridgeOp {
		return &revocationpb.BridgeOp{Op: &revocationpb.BridgeOp_Add{Add: &revocationpb.Add{Session: 1, Binding: b}}}
	}
	tooMany := &revocationpb.BridgeMessage{}
	for range MaxOps + 1 {
		tooMany.Ops = append(tooMany.Ops, add("b"))
	}
	for _, tc := range []struct {
		name string
		in   *revocationpb.BridgeMessage
	}{
		{"too many ops", tooMany},
		{"op without kind", &revocationpb.BridgeMessage{Ops: []*revocationpb.BridgeOp{{}}}},
		{"binding too long", &revocationpb.BridgeMessage{Ops: []*revocationpb.BridgeOp{add(strings.Repeat("b", MaxBindingLen+1))}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := fromBridge(tc.in); !errors.Is(err, ErrMessage) {
				t.Fatalf("fromBridge = %v, want ErrMessage", err)
			}
		})
	}
}

func TestFromExtauthzRejects(t *testing.T) {
	revoke := func(r string) *revocationpb.ExtauthzMessage {
		return &revocationpb.ExtauthzMessage{Ops: []*revocationpb.ExtauthzOp{
			{Op: &revocationpb.ExtauthzOp_Revoke{Revoke: &revocationpb.Revoke{Session: 1, Reason: r}}}}}
	}
	tooMany := &revocationpb.ExtauthzMessage{}
	for range MaxOps + 1 {
		tooMany.Ops = append(tooMany.Ops, revoke("pod_not_found").Ops[0])
	}
	for _, tc := range []struct {
		name string
		in   *revocationpb.ExtauthzMessage
	}{
		{"too many ops", tooMany},
		{"op without kind", &revocationpb.ExtauthzMessage{Ops: []*revocationpb.ExtauthzOp{{}}}},
		{"empty reason", revoke("")},
		{"reason not a code", revoke("Pod Not Found")},
		{"reason too long", revoke(strings.Repeat("a", 65))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := fromExtauthz(tc.in); !errors.Is(err, ErrMessage) {
				t.Fatalf("fromExtauthz = %v, want ErrMessage", err)
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
		size := proto.Size(toBridge(b))
		if len(b) == 0 || len(b) > MaxOps || size > MaxMessage {
			t.Fatalf("batch of %d ops, %d bytes", len(b), size)
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
