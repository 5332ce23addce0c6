package refrelay

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/relayproto"
)

// FuzzHandleConn feeds arbitrary bytes to a connection handler, as a client
// would. The handler must return once the input ends, never panic, and
// register at most the one key of a leading 32-byte Register.
func FuzzHandleConn(f *testing.F) {
	var k relayproto.Key
	k[0] = 7
	reg := relayproto.AppendRegister(nil, k)
	f.Add(reg)
	f.Add(relayproto.AppendData(append([]byte(nil), reg...), k, []byte("echo")))
	f.Add(append(append([]byte(nil), reg...), 0, 0, 0, 0, 2))
	f.Add(append(append([]byte(nil), reg...), 0, 1, 0, 1, 2))
	f.Add(relayproto.AppendFrame(append([]byte(nil), reg...), relayproto.TypeBimodalHint, k[:]))
	f.Add(relayproto.AppendFrame(nil, relayproto.TypeForwarderRegister, make([]byte, 66)))
	f.Add(relayproto.AppendFrame(nil, relayproto.TypeRegister, make([]byte, 31)))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		srv, err := New(Options{WriteStallTimeout: 50 * time.Millisecond, DisableUDP: true})
		if err != nil {
			t.Fatal(err)
		}
		client, server := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.handleConn(server)
			server.Close()
		}()
		drained := make(chan struct{})
		go func() { defer close(drained); _, _ = io.Copy(io.Discard, client) }()
		_ = client.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = client.Write(in)
		client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("handler did not return after the input ended")
		}
		<-drained
		st := srv.Stats()
		if st.Registrations > 1 || st.ActiveSessions != 0 {
			t.Fatalf("stats = %+v", st)
		}
		if st.Registrations == 1 && (len(in) < len(reg) || in[4] != byte(relayproto.TypeRegister)) {
			t.Fatalf("registered without a leading Register: %+v", st)
		}
	})
}
