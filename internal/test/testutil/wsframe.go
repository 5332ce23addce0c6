package testutil

import "encoding/binary"

// ClientFrame encodes one WebSocket frame as a client sends it (RFC 6455
// section 5.2): masked with mask, or unmasked (a protocol error from a
// client) when mask is nil. For tests of the bridge's own frame decoding.
func ClientFrame(fin bool, op byte, payload []byte, mask []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	m := byte(0)
	if mask != nil {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		out = append(out, m|byte(n))
	case n <= 0xFFFF:
		out = binary.BigEndian.AppendUint16(append(out, m|126), uint16(n))
	default:
		out = binary.BigEndian.AppendUint64(append(out, m|127), uint64(n))
	}
	if mask == nil {
		return append(out, payload...)
	}
	out = append(out, mask...)
	for i, c := range payload {
		out = append(out, c^mask[i&3])
	}
	return out
}

// WSMask is a masking key for ClientFrame.
var WSMask = []byte{0x12, 0x34, 0x56, 0x78}
