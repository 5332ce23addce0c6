//go:build e2e

package e2e

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// testRegister: scenario 4, the Register rule and the frame filter.
func (e *env) testRegister(t *testing.T, f front) {
	victim := e.podAgent(t, peerName(f, "s4-victim"))
	victimConn := session(t, f, victim)
	id := e.podAgent(t, peerName(f, "s4-agent"))
	raw := func(t *testing.T) *testagent.Conn {
		t.Helper()
		c, err := dialRawRetry(f.opts(id))
		fatalIf(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	policy := websocket.ClosePolicyViolation
	t.Run("another_peers_key", func(t *testing.T) {
		c := raw(t)
		fatalIf(t, c.WriteFrame(relayproto.TypeRegister, victim.key[:]))
		wantClose(t, c, policy, contract.CloseRegisterKeyMismatch, ioTimeout)
		// Had the relay seen a Register for the victim's key, it would have
		// replaced (closed) the victim's session: it is still the live one.
		alive(t, victimConn, victim.key)
	})
	t.Run("register_after_deadline", func(t *testing.T) {
		// start is when the dial that was upgraded began, so before the
		// bridge's upgrade started its timer: a close seen less than
		// registerTimeout after it came early. (No slack: how late it comes
		// is not checked, only the order; the exact instant is
		// TestRegisterDeadlineIsExact's. Earlier refused attempts, such as
		// the key-mismatch backoff of the case before, do not count.)
		var start time.Time
		c, err := testagent.RetryBackoff(context.Background(), backoffWithin, func() (*testagent.Conn, error) {
			start = time.Now()
			return testagent.DialRaw(context.Background(), f.opts(id))
		})
		fatalIf(t, err)
		t.Cleanup(func() { c.Close() })
		wantClose(t, c, policy, contract.CloseRegisterTimeout, registerTimeout+ioTimeout)
		if d := time.Since(start); d < registerTimeout {
			t.Errorf("closed %s after the dial began, before the %s register deadline", d, registerTimeout)
		}
	})
	t.Run("data_frame_first", func(t *testing.T) {
		c := raw(t)
		fatalIf(t, c.SendData(id.key, []byte("x")))
		wantClose(t, c, policy, contract.CloseRegisterMissing, ioTimeout)
	})
	t.Run("second_register", func(t *testing.T) {
		c := session(t, f, id)
		fatalIf(t, c.WriteFrame(relayproto.TypeRegister, id.key[:]))
		wantClose(t, c, policy, contract.CloseRegisterRepeated, ioTimeout)
	})
	for _, ft := range []relayproto.FrameType{relayproto.TypeForwarderRegister, relayproto.TypeIngressProbe} {
		t.Run("control_first_"+ft.String(), func(t *testing.T) {
			c := raw(t)
			fatalIf(t, c.WriteFrame(ft, controlBody(ft, victim.key)))
			wantClose(t, c, policy, contract.CloseRegisterMissing, ioTimeout)
		})
	}
	t.Run("relay_to_relay_frame", func(t *testing.T) {
		c := session(t, f, id)
		fatalIf(t, c.WriteFrame(relayproto.TypeClusterEnvelope, randomBytes(40)))
		wantClose(t, c, policy, contract.CloseFrameForbidden, ioTimeout)
	})
	t.Run("frame_of_65537_bytes", func(t *testing.T) {
		c := session(t, f, id)
		frame := binary.BigEndian.AppendUint32(nil, relayproto.MaxFrameSize+1)
		frame = append(frame, byte(relayproto.TypeData))
		frame = append(frame, randomBytes(relayproto.MaxFrameSize)...)
		// Split as the agent would; the bridge must refuse on the header.
		c.WriteMessages(frame[:65499], frame[65499:])
		wantClose(t, c, websocket.CloseMessageTooBig, contract.CloseFrameTooLarge, ioTimeout)
	})
	t.Run("register_split_in_one_byte_messages", func(t *testing.T) {
		c := raw(t)
		reg := relayproto.AppendRegister(nil, id.key)
		for i := range reg {
			fatalIf(t, c.WriteMessages(reg[i:i+1]))
		}
		alive(t, c, id.key)
	})
	t.Run("several_frames_in_one_message", func(t *testing.T) {
		c := raw(t)
		msg := relayproto.AppendRegister(nil, id.key)
		msg = relayproto.AppendFrame(msg, relayproto.TypeKeepalive)
		msg = relayproto.AppendData(msg, id.key, []byte("one"))
		msg = relayproto.AppendData(msg, id.key, []byte("two"))
		fatalIf(t, c.WriteMessages(msg))
		for _, want := range []string{"one", "two"} {
			src, got, err := c.ReadData(ioTimeout)
			fatalIf(t, err)
			if !src.Equal(id.key) || string(got) != want {
				t.Fatalf("got %q from %s, want %q from itself", got, src, want)
			}
		}
	})
	alive(t, victimConn, victim.key)
}

// controlBody is a well-formed body of a control frame.
func controlBody(t relayproto.FrameType, k relayproto.Key) []byte {
	if t == relayproto.TypeForwarderRegister {
		b := binary.BigEndian.AppendUint16(nil, 51820)
		return append(append(b, k[:]...), k[:]...)
	}
	b := binary.BigEndian.AppendUint16(nil, 1)
	return append(b, k[:]...)
}
