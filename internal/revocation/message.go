package revocation

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Kind is the type of one Op.
type Kind byte

// Op kinds. The bridge sends Add, Remove and Synced; extauthz sends Revoke
// and SyncedAck.
const (
	// KindAdd: a live session (ID) and its binding (Binding).
	KindAdd Kind = 0x01
	// KindRemove: the session ID ended.
	KindRemove Kind = 0x02
	// KindSynced: every live session up to here was sent; ID is the
	// stream's generation.
	KindSynced Kind = 0x03
	// KindRevoke: the session ID must close with Reason; EventUnixNano is
	// when extauthz saw the event that ended it (0 when not known).
	KindRevoke Kind = 0x81
	// KindSyncedAck: every Add before the Synced of generation ID has been
	// judged and its revocations sent before this.
	KindSyncedAck Kind = 0x83
)

// FromBridge reports whether the bridge may send k.
func (k Kind) FromBridge() bool { return k == KindAdd || k == KindRemove || k == KindSynced }

// FromExtauthz reports whether extauthz may send k.
func (k Kind) FromExtauthz() bool { return k == KindRevoke || k == KindSyncedAck }

// Op is one entry of a message.
type Op struct {
	Kind          Kind
	ID            uint64
	Binding       string // KindAdd
	Reason        string // KindRevoke: a stable reason code
	EventUnixNano int64  // KindRevoke
}

// Limits of one message. A sender splits longer lists (see Batches).
const (
	MaxOps       = 512
	MaxMessage   = 1 << 20 // the gRPC receive limit of extauthz
	maxReasonLen = 64
	version      = 1
)

// ErrMessage is returned for a message that does not decode.
var ErrMessage = errors.New("revocation: message invalid")

// Message layout, all integers big-endian:
//
//	[1 byte version = 1][2 bytes op count]
//	then per op: [1 byte kind][8 bytes id] and
//	  Add:    [2 bytes length][binding]
//	  Revoke: [8 bytes event unix nanoseconds][1 byte length][reason]
//	  Remove, Synced, SyncedAck: nothing more

// Encode appends the message holding ops to dst. It panics on a caller bug
// (too many ops, an oversized field), never on peer input.
func Encode(dst []byte, ops []Op) []byte {
	if len(ops) > MaxOps {
		panic("revocation: too many ops in one message")
	}
	dst = append(dst, version)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(ops)))
	for _, op := range ops {
		dst = append(dst, byte(op.Kind))
		dst = binary.BigEndian.AppendUint64(dst, op.ID)
		switch op.Kind {
		case KindAdd:
			if len(op.Binding) > MaxBindingLen {
				panic("revocation: binding too long")
			}
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(op.Binding)))
			dst = append(dst, op.Binding...)
		case KindRevoke:
			if len(op.Reason) > maxReasonLen {
				panic("revocation: reason too long")
			}
			dst = binary.BigEndian.AppendUint64(dst, uint64(op.EventUnixNano))
			dst = append(dst, byte(len(op.Reason)))
			dst = append(dst, op.Reason...)
		}
	}
	return dst
}

// Decode parses one message strictly: known version and kinds, every
// length checked before it is used, nothing left over. It never allocates
// more than the ops it returns (bounded by MaxOps) and their strings.
func Decode(p []byte) ([]Op, error) {
	if len(p) > MaxMessage {
		return nil, fmt.Errorf("%w: %d bytes", ErrMessage, len(p))
	}
	if len(p) < 3 || p[0] != version {
		return nil, fmt.Errorf("%w: no version %d header", ErrMessage, version)
	}
	n := int(binary.BigEndian.Uint16(p[1:3]))
	if n > MaxOps {
		return nil, fmt.Errorf("%w: %d ops", ErrMessage, n)
	}
	p = p[3:]
	ops := make([]Op, 0, min(n, len(p)/9))
	for range n {
		op, rest, err := decodeOp(p)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		p = rest
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMessage, len(p))
	}
	return ops, nil
}

func decodeOp(p []byte) (Op, []byte, error) {
	if len(p) < 9 {
		return Op{}, nil, fmt.Errorf("%w: truncated op", ErrMessage)
	}
	op := Op{Kind: Kind(p[0]), ID: binary.BigEndian.Uint64(p[1:9])}
	p = p[9:]
	switch op.Kind {
	case KindAdd:
		if len(p) < 2 {
			return Op{}, nil, fmt.Errorf("%w: truncated add", ErrMessage)
		}
		l := int(binary.BigEndian.Uint16(p))
		if l > MaxBindingLen || len(p)-2 < l {
			return Op{}, nil, fmt.Errorf("%w: binding of %d bytes", ErrMessage, l)
		}
		op.Binding = string(p[2 : 2+l])
		return op, p[2+l:], nil
	case KindRevoke:
		if len(p) < 9 {
			return Op{}, nil, fmt.Errorf("%w: truncated revoke", ErrMessage)
		}
		op.EventUnixNano = int64(binary.BigEndian.Uint64(p))
		l := int(p[8])
		if l == 0 || l > maxReasonLen || len(p)-9 < l || !reasonChars(p[9:9+l]) {
			return Op{}, nil, fmt.Errorf("%w: reason of %d bytes", ErrMessage, l)
		}
		op.Reason = string(p[9 : 9+l])
		return op, p[9+l:], nil
	case KindRemove, KindSynced, KindSyncedAck:
		return op, p, nil
	}
	return Op{}, nil, fmt.Errorf("%w: kind %#x", ErrMessage, byte(op.Kind))
}

// reasonChars: reason codes are lower-case words joined by '_'.
func reasonChars(b []byte) bool {
	for _, c := range b {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// Batches splits ops into messages of at most MaxOps ops and about half of
// MaxMessage bytes each.
func Batches(ops []Op) [][]Op {
	var out [][]Op
	for len(ops) > 0 {
		n, size := 0, 3
		for n < len(ops) && n < MaxOps && size+opSize(ops[n]) <= MaxMessage/2 {
			size += opSize(ops[n])
			n++
		}
		n = max(n, 1) // one op always fits: each field is bounded
		out = append(out, ops[:n])
		ops = ops[n:]
	}
	return out
}

func opSize(op Op) int { return 9 + 2 + len(op.Binding) + 9 + len(op.Reason) }
