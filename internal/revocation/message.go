package revocation

import (
	"errors"
	"fmt"

	"github.com/wirekube/relay-ws/internal/revocation/revocationpb"
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
	MaxMessage   = 1 << 20 // the gRPC receive limit of both ends
	maxReasonLen = 64
)

// ErrMessage is returned for a message that does not validate.
var ErrMessage = errors.New("revocation: message invalid")

// The wire format is revocationpb (revocation.proto): a BridgeMessage or an
// ExtauthzMessage of at most MaxOps ops. toProto and the fromBridge /
// fromExtauthz validators are the only code that touches it.

// toBridge renders ops of the bridge's kinds. It panics on a caller bug
// (another kind, too many ops, an oversized binding), never on peer input.
func toBridge(ops []Op) *revocationpb.BridgeMessage {
	if len(ops) > MaxOps {
		panic("revocation: too many ops in one message")
	}
	m := &revocationpb.BridgeMessage{Ops: make([]*revocationpb.BridgeOp, 0, len(ops))}
	for _, op := range ops {
		var o revocationpb.BridgeOp
		switch op.Kind {
		case KindAdd:
			if len(op.Binding) > MaxBindingLen {
				panic("revocation: binding too long")
			}
			o.Op = &revocationpb.BridgeOp_Add{Add: &revocationpb.Add{Session: op.ID, Binding: op.Binding}}
		case KindRemove:
			o.Op = &revocationpb.BridgeOp_Remove{Remove: &revocationpb.Remove{Session: op.ID}}
		case KindSynced:
			o.Op = &revocationpb.BridgeOp_Synced{Synced: &revocationpb.Synced{Generation: op.ID}}
		default:
			panic("revocation: not a bridge op")
		}
		m.Ops = append(m.Ops, &o)
	}
	return m
}

// toExtauthz renders ops of extauthz's kinds; it panics like toBridge.
func toExtauthz(ops []Op) *revocationpb.ExtauthzMessage {
	if len(ops) > MaxOps {
		panic("revocation: too many ops in one message")
	}
	m := &revocationpb.ExtauthzMessage{Ops: make([]*revocationpb.ExtauthzOp, 0, len(ops))}
	for _, op := range ops {
		var o revocationpb.ExtauthzOp
		switch op.Kind {
		case KindRevoke:
			if len(op.Reason) > maxReasonLen {
				panic("revocation: reason too long")
			}
			o.Op = &revocationpb.ExtauthzOp_Revoke{Revoke: &revocationpb.Revoke{
				Session: op.ID, Reason: op.Reason, EventUnixNano: op.EventUnixNano}}
		case KindSyncedAck:
			o.Op = &revocationpb.ExtauthzOp_SyncedAck{SyncedAck: &revocationpb.SyncedAck{Generation: op.ID}}
		default:
			panic("revocation: not an extauthz op")
		}
		m.Ops = append(m.Ops, &o)
	}
	return m
}

// fromBridge validates a message the bridge sent: at most MaxOps ops, each
// of one known kind, every binding within MaxBindingLen (ParseBinding
// judges its content later). Anything else is ErrMessage.
func fromBridge(m *revocationpb.BridgeMessage) ([]Op, error) {
	if len(m.GetOps()) > MaxOps {
		return nil, fmt.Errorf("%w: %d ops", ErrMessage, len(m.GetOps()))
	}
	ops := make([]Op, 0, len(m.GetOps()))
	for i, o := range m.GetOps() {
		var op Op
		switch v := o.GetOp().(type) {
		case *revocationpb.BridgeOp_Add:
			if len(v.Add.GetBinding()) > MaxBindingLen {
				return nil, fmt.Errorf("%w: op %d: binding of %d bytes", ErrMessage, i, len(v.Add.GetBinding()))
			}
			op = Op{Kind: KindAdd, ID: v.Add.GetSession(), Binding: v.Add.GetBinding()}
		case *revocationpb.BridgeOp_Remove:
			op = Op{Kind: KindRemove, ID: v.Remove.GetSession()}
		case *revocationpb.BridgeOp_Synced:
			op = Op{Kind: KindSynced, ID: v.Synced.GetGeneration()}
		default:
			return nil, fmt.Errorf("%w: op %d: no known kind", ErrMessage, i)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// fromExtauthz validates a message extauthz sent: at most MaxOps ops, each
// a Revoke with a reason code or a SyncedAck. Anything else is ErrMessage.
func fromExtauthz(m *revocationpb.ExtauthzMessage) ([]Op, error) {
	if len(m.GetOps()) > MaxOps {
		return nil, fmt.Errorf("%w: %d ops", ErrMessage, len(m.GetOps()))
	}
	ops := make([]Op, 0, len(m.GetOps()))
	for i, o := range m.GetOps() {
		var op Op
		switch v := o.GetOp().(type) {
		case *revocationpb.ExtauthzOp_Revoke:
			r := v.Revoke.GetReason()
			if r == "" || len(r) > maxReasonLen || !reasonChars(r) {
				return nil, fmt.Errorf("%w: op %d: reason of %d bytes", ErrMessage, i, len(r))
			}
			op = Op{Kind: KindRevoke, ID: v.Revoke.GetSession(), Reason: r, EventUnixNano: v.Revoke.GetEventUnixNano()}
		case *revocationpb.ExtauthzOp_SyncedAck:
			op = Op{Kind: KindSyncedAck, ID: v.SyncedAck.GetGeneration()}
		default:
			return nil, fmt.Errorf("%w: op %d: no known kind", ErrMessage, i)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// reasonChars: reason codes are lower-case words joined by '_'.
func reasonChars(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && c != '_' {
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
		n, size := 0, 0
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

// opSize bounds the encoded size of op: tags, lengths and varints take at
// most 30 bytes besides the strings.
func opSize(op Op) int { return 30 + len(op.Binding) + len(op.Reason) }
