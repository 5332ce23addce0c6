package bridge

import (
	"bytes"
	"errors"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/relayproto"
)

// feed runs the filter over chunks as the session does (leftover bytes of
// an incomplete frame are kept) and returns what it forwarded.
func feed(key relayproto.Key, chunks [][]byte) ([]byte, error) {
	f := frameFilter{key: key}
	var fwd, pending []byte
	for _, c := range chunks {
		pending = append(pending, c...)
		n, err := f.scan(pending, func(p []byte) error { fwd = append(fwd, p...); return nil })
		if err != nil {
			return fwd, err
		}
		pending = pending[n:]
	}
	return fwd, nil
}

func reasonOf(err error) contract.Reason {
	var ce *closeError
	if errors.As(err, &ce) {
		return ce.reason
	}
	return ""
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var streamKey = testKey(1)

// streamCases are the table cases, also the fuzz seeds.
func streamCases() []struct {
	name    string
	in      []byte
	reason  contract.Reason
	forward int // bytes forwarded
} {
	reg := relayproto.AppendRegister(nil, streamKey)
	data := dataFrame(streamKey, 1, 60)
	unknown := relayproto.AppendFrame(nil, 0x42, []byte("x"))
	return []struct {
		name    string
		in      []byte
		reason  contract.Reason
		forward int
	}{
		{"register", reg, "", len(reg)},
		{"register then data", cat(reg, data), "", len(reg) + len(data)},
		{"unknown dropped", cat(reg, data, unknown, data), "", len(reg) + 2*len(data)},
		{"incomplete data held back", cat(reg, data[:20]), "", len(reg)},
		{"wrong key", relayproto.AppendRegister(nil, testKey(2)), contract.CloseRegisterKeyMismatch, 0},
		{"data first", data, contract.CloseRegisterMissing, 0},
		{"short register", relayproto.AppendFrame(nil, relayproto.TypeRegister, streamKey[:8]), contract.CloseRegisterMalformed, 0},
		{"empty frame first", rawHeader(0, 1), contract.CloseFrameMalformed, 0},
		{"huge first", rawHeader(1<<31, 1), contract.CloseFrameTooLarge, 0},
		{"empty length prefix alone", rawHeader(0, 1)[:4], contract.CloseFrameMalformed, 0},
		{"huge length prefix alone", rawHeader(relayproto.MaxFrameSize+1, 1)[:4], contract.CloseFrameTooLarge, 0},
		{"empty length prefix after data", cat(reg, data, rawHeader(0, 2)[:4]), contract.CloseFrameMalformed, len(reg) + len(data)},
		{"3 bytes of a length prefix wait", cat(reg, rawHeader(0, 2)[:3]), "", len(reg)},
		{"register twice", cat(reg, reg), contract.CloseRegisterRepeated, len(reg)},
		{"control after register", cat(reg, data, relayproto.AppendFrame(nil, 0x11, []byte{0, 1})), contract.CloseFrameForbidden, len(reg) + len(data)},
		{"error type", cat(reg, relayproto.AppendFrame(nil, 0xFF, []byte("e"))), contract.CloseFrameForbidden, len(reg)},
		{"relay to relay", cat(reg, relayproto.AppendFrame(nil, 0x22, nil)), contract.CloseFrameForbidden, len(reg)},
		{"oversized after data", cat(reg, data, rawHeader(relayproto.MaxFrameSize+1, 2)), contract.CloseFrameTooLarge, len(reg) + len(data)},
		{"max size ok", cat(reg, relayproto.AppendFrame(nil, 2, make([]byte, relayproto.MaxBodySize))), "", len(reg) + maxWireFrame},
	}
}

func TestFrameFilter(t *testing.T) {
	for _, tt := range streamCases() {
		for _, size := range []int{1, 2, 5, 7, 64, 1 << 20} {
			fwd, err := feed(streamKey, split(tt.in, size))
			if reasonOf(err) != tt.reason || (err != nil && tt.reason == "") || len(fwd) != tt.forward {
				t.Errorf("%s, %d-byte messages: forwarded %d, %v; want %d, %q", tt.name, size, len(fwd), err, tt.forward, tt.reason)
			}
			if !bytes.Equal(fwd, tt.in[:len(fwd)]) && tt.name != "unknown dropped" {
				t.Errorf("%s: forwarded bytes differ from the input", tt.name)
			}
		}
	}
}

// FuzzClientStream: however the stream is split into messages, the filter
// forwards the same bytes and ends the same way; what it forwards is whole
// frames of allowed types starting with the vouched Register.
func FuzzClientStream(f *testing.F) {
	for _, tt := range streamCases() {
		if len(tt.in) < 4096 {
			f.Add(tt.in, uint8(3))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		whole, werr := feed(streamKey, [][]byte{in})
		parts, perr := feed(streamKey, split(in, int(chunk)+1))
		if !bytes.Equal(whole, parts) || reasonOf(werr) != reasonOf(perr) {
			t.Fatalf("split changes the result: %d bytes %q vs %d bytes %q", len(whole), reasonOf(werr), len(parts), reasonOf(perr))
		}
		if werr != nil && reasonOf(werr) == "" {
			t.Fatalf("error without a close reason: %v", werr)
		}
		checkForwarded(t, whole)
	})
}

func checkForwarded(t *testing.T, fwd []byte) {
	r := bytes.NewReader(fwd)
	for i := 0; r.Len() > 0; i++ {
		fr, err := relayproto.ReadFrame(r, nil)
		if err != nil {
			t.Fatalf("forwarded bytes are not whole frames: %v", err)
		}
		switch {
		case i == 0 && (fr.Type != relayproto.TypeRegister || !bytes.Equal(fr.Body, streamKey[:])):
			t.Fatalf("first forwarded frame is %#v, not the vouched Register", fr.Type)
		case i > 0 && (!fr.Type.Known() || fr.Type == relayproto.TypeRegister || fr.Type.IsControl() ||
			fr.Type.IsRelayToRelay() || fr.Type == relayproto.TypeError):
			t.Fatalf("forwarded frame %d of type %#v", i, fr.Type)
		}
	}
}
