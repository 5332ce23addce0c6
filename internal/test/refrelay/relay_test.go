package refrelay_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/internal/test/refrelay/refrelaytest"
	"github.com/wirekube/relay-ws/internal/test/testutil"
	"github.com/wirekube/relay-ws/relayproto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestEchoToSelf(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{})
	a := refrelaytest.Register(t, srv, addr, key(1))
	write(t, a, relayproto.AppendData(nil, key(1), []byte("hello")))
	expectData(t, a, relayproto.TypeData, key(1), []byte("hello"))
	write(t, a, frame(relayproto.TypeBimodalHint, keyBytes(1)))
	expectData(t, a, relayproto.TypeBimodalHint, key(1), nil)
	if st := srv.Stats(); st.FramesForwarded != 2 || st.Registrations != 1 || st.ActiveSessions != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestExchangeBothWays(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{})
	conns := map[byte]net.Conn{
		1: refrelaytest.Register(t, srv, addr, key(1)),
		2: refrelaytest.Register(t, srv, addr, key(2)),
	}
	const n = 200 // under the queue depth, so nothing may be dropped
	payload := func(from byte, i int) []byte {
		return append(bytes.Repeat([]byte{from}, 1400), fmt.Sprint(i)...)
	}
	var wg sync.WaitGroup
	for from, to := range map[byte]byte{1: 2, 2: 1} {
		wg.Go(func() {
			var buf []byte
			for i := range n {
				buf = relayproto.AppendData(buf, key(to), payload(from, i))
			}
			_ = conns[from].SetWriteDeadline(time.Now().Add(ioTimeout))
			if _, err := conns[from].Write(buf); err != nil {
				t.Errorf("write %d: %v", from, err)
			}
		})
	}
	for to, from := range map[byte]byte{1: 2, 2: 1} {
		for i := range n {
			expectData(t, conns[to], relayproto.TypeData, key(from), payload(from, i))
		}
	}
	wg.Wait()
	if st := srv.Stats(); st.FramesForwarded != 2*n || st.DroppedQueueFull != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestBimodalHintRewrittenToSender(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{})
	a := refrelaytest.Register(t, srv, addr, key(1))
	b := refrelaytest.Register(t, srv, addr, key(2))
	write(t, a, frame(relayproto.TypeBimodalHint, keyBytes(2)))
	expectData(t, b, relayproto.TypeBimodalHint, key(1), nil)
}

func TestReplacementClosesOlderSession(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{})
	old := refrelaytest.Register(t, srv, addr, key(1))
	cur := refrelaytest.Register(t, srv, addr, key(1))
	expectClosed(t, old)
	write(t, cur, relayproto.AppendData(nil, key(1), []byte("still here")))
	expectData(t, cur, relayproto.TypeData, key(1), []byte("still here"))
	st := srv.Stats()
	if st.Replacements != 1 || srv.RegisterCount(key(1)) != 2 || st.ActiveSessions != 1 || !srv.Registered(key(1)) {
		t.Fatalf("stats = %+v, count = %d", st, srv.RegisterCount(key(1)))
	}
}

func TestSecondRegisterIgnored(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{})
	a := refrelaytest.Register(t, srv, addr, key(1))
	write(t, a, relayproto.AppendRegister(nil, key(2)))
	write(t, a, relayproto.AppendData(nil, key(2), []byte("to nobody")))
	write(t, a, relayproto.AppendData(nil, key(1), []byte("echo")))
	// The echo comes back from the first key: the session was not re-keyed.
	expectData(t, a, relayproto.TypeData, key(1), []byte("echo"))
	st := srv.Stats()
	if st.SecondRegisters != 1 || st.Unknown != 1 || st.DroppedNoDestination != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if srv.Registered(key(2)) || srv.RegisterCount(key(2)) != 0 {
		t.Fatal("second Register registered its key")
	}
}

func TestIgnoredAndUnknownTypesAfterRegister(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{})
	a := refrelaytest.Register(t, srv, addr, key(1))
	var in []byte
	for _, f := range []struct {
		t    relayproto.FrameType
		body []byte
	}{
		{relayproto.TypeKeepalive, nil},
		{relayproto.TypeNATProbe, []byte{127, 0, 0, 1, 0x0d, 0x96}},
		{relayproto.TypeRelayProbe, make([]byte, 8)},
		{relayproto.TypeExternalData, make([]byte, 12)},
		{relayproto.TypeForwarderRegister, make([]byte, 66)},
		{relayproto.TypeClusterEnvelope, nil},
		{relayproto.TypeError, []byte("x")},
		{0x7f, nil},
		{relayproto.TypeData, make([]byte, 31)},
	} {
		in = relayproto.AppendFrame(in, f.t, f.body)
	}
	write(t, a, in)
	write(t, a, relayproto.AppendData(nil, key(1), []byte("alive")))
	expectData(t, a, relayproto.TypeData, key(1), []byte("alive"))
	st := srv.Stats()
	if st.Ignored != 4 || st.Unknown != 4 || st.DroppedShort != 1 || st.ActiveSessions != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestFirstFrame(t *testing.T) {
	refused := frame(relayproto.TypeError, []byte(refrelay.ControlRefusedText))
	tests := []struct {
		name   string
		in     []byte
		answer []byte // expected bytes before the close
		check  func(refrelay.Stats) bool
	}{
		{"forwarder register", frame(relayproto.TypeForwarderRegister, make([]byte, 66)), refused,
			func(s refrelay.Stats) bool { return s.ControlRefused == 1 }},
		{"forwarder unregister", frame(relayproto.TypeForwarderUnregister, []byte{0, 1}), refused,
			func(s refrelay.Stats) bool { return s.ControlRefused == 1 }},
		{"ingress probe", frame(relayproto.TypeIngressProbe, []byte{0, 0}), refused,
			func(s refrelay.Stats) bool { return s.ControlRefused == 1 }},
		{"forwarder stats is not a control opener", frame(relayproto.TypeForwarderStats, []byte{0, 1}), nil,
			func(s refrelay.Stats) bool { return s.FirstFrameRejected == 1 }},
		{"data", relayproto.AppendData(nil, key(1), []byte("x")), nil,
			func(s refrelay.Stats) bool { return s.FirstFrameRejected == 1 }},
		{"keepalive", frame(relayproto.TypeKeepalive, nil), nil,
			func(s refrelay.Stats) bool { return s.FirstFrameRejected == 1 }},
		{"short register", frame(relayproto.TypeRegister, make([]byte, 31)), nil,
			func(s refrelay.Stats) bool { return s.FirstFrameRejected == 1 }},
		{"long register", frame(relayproto.TypeRegister, make([]byte, 33)), nil,
			func(s refrelay.Stats) bool { return s.FirstFrameRejected == 1 }},
		{"garbage", []byte{0, 0, 0, 3, 0x99, 1, 2}, nil,
			func(s refrelay.Stats) bool { return s.FirstFrameRejected == 1 }},
		{"zero length", rawHeader(0, relayproto.TypeRegister), nil,
			func(s refrelay.Stats) bool { return s.BadLength == 1 }},
		{"oversized length", rawHeader(relayproto.MaxFrameSize+1, relayproto.TypeRegister), nil,
			func(s refrelay.Stats) bool { return s.BadLength == 1 }},
		{"huge length", rawHeader(0xffffffff, relayproto.TypeData), nil,
			func(s refrelay.Stats) bool { return s.BadLength == 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, addr := refrelaytest.Start(t, refrelay.Options{})
			c := dial(t, addr)
			write(t, c, tt.in)
			if tt.answer != nil {
				got := make([]byte, len(tt.answer))
				_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
				if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, tt.answer) {
					t.Fatalf("answer = %q, %v; want %q", got, err, tt.answer)
				}
			}
			expectClosed(t, c)
			if st := srv.Stats(); !tt.check(st) || st.Registrations != 0 {
				t.Fatalf("stats = %+v", st)
			}
		})
	}
}

func TestOversizedFrameClosesSession(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{})
	a := refrelaytest.Register(t, srv, addr, key(1))
	write(t, a, rawHeader(relayproto.MaxFrameSize+1, relayproto.TypeData))
	expectClosed(t, a)
	testutil.Eventually(t, "session end", func() bool { return !srv.Registered(key(1)) })
	if st := srv.Stats(); st.BadLength != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// flood sends count Data frames of size bytes from src to dst, numbered in
// their first 4 payload bytes, then an echo to itself, and waits for the
// echo: after it, the relay has handled every flood frame.
func flood(t *testing.T, src net.Conn, srcKey, dst relayproto.Key, count, size int) {
	t.Helper()
	payload := make([]byte, size)
	buf := make([]byte, 0, relayproto.HeaderSize+relayproto.KeySize+size)
	for i := range count {
		binary.BigEndian.PutUint32(payload, uint32(i))
		write(t, src, relayproto.AppendData(buf[:0], dst, payload))
	}
	write(t, src, relayproto.AppendData(nil, srcKey, []byte("sync")))
	expectData(t, src, relayproto.TypeData, srcKey, []byte("sync"))
}

func TestQueueFullDropsNewest(t *testing.T) {
	const depth, count, size = 4, 400, 60000
	srv, addr := refrelaytest.Start(t, refrelay.Options{QueueDepth: depth, WriteStallTimeout: time.Minute})
	a := refrelaytest.Register(t, srv, addr, key(1))
	b := refrelaytest.Register(t, srv, addr, key(2)) // does not read during the flood
	flood(t, a, key(1), key(2), count, size)
	st := srv.Stats()
	if st.DroppedQueueFull == 0 || st.FramesForwarded+st.DroppedQueueFull != count+1 {
		t.Fatalf("stats = %+v: want drops, forwarded+dropped = %d", st, count+1)
	}
	// b receives the forwarded frames (all but the sync echo) in order. The
	// writer is blocked at the end of the flood, so with drop-newest the last
	// frame sent is among the dropped (drop-oldest would have queued it).
	last := -1
	for range int(st.FramesForwarded) - 1 {
		f := readFrame(t, b)
		_, p, err := relayproto.ParseData(f.Body)
		if err != nil {
			t.Fatal(err)
		}
		n := int(binary.BigEndian.Uint32(p))
		if n <= last {
			t.Fatalf("frame %d after frame %d: out of order", n, last)
		}
		last = n
	}
	if last == count-1 {
		t.Fatalf("the newest frame %d was delivered: the queue dropped older frames", last)
	}
	write(t, a, relayproto.AppendData(nil, key(2), []byte("after")))
	expectData(t, b, relayproto.TypeData, key(1), []byte("after"))
}

func TestStalledReaderDisconnected(t *testing.T) {
	const stall = 200 * time.Millisecond
	srv, addr := refrelaytest.Start(t, refrelay.Options{WriteStallTimeout: stall})
	a := refrelaytest.Register(t, srv, addr, key(1))
	b := refrelaytest.Register(t, srv, addr, key(2))
	_ = b.(*net.TCPConn).SetReadBuffer(4096)
	start := time.Now()
	for srv.Stats().StallDisconnects == 0 {
		if time.Since(start) > ioTimeout {
			t.Fatalf("no stall disconnect: %+v", srv.Stats())
		}
		flood(t, a, key(1), key(2), 16, 60000)
	}
	if time.Since(start) < stall {
		t.Fatalf("disconnected after %s, before the stall timeout %s", time.Since(start), stall)
	}
	testutil.Eventually(t, "stalled session gone", func() bool { return !srv.Registered(key(2)) })
	// The sender's session is untouched.
	write(t, a, relayproto.AppendData(nil, key(1), []byte("ok")))
	expectData(t, a, relayproto.TypeData, key(1), []byte("ok"))
}

func TestServeStopsOnCancel(t *testing.T) {
	srv, err := refrelay.New(refrelay.Options{WriteStallTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	addr := ln.Addr().String()
	a := refrelaytest.Register(t, srv, addr, key(1))
	b := refrelaytest.Register(t, srv, addr, key(2))
	silent := dial(t, addr)                 // never sends a first frame
	flood(t, a, key(1), key(2), 400, 60000) // b does not read: its writer blocks in a write
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("Serve did not return after cancel")
	}
	for _, c := range []net.Conn{a, silent} {
		expectClosed(t, c)
	}
	// b still holds unread frames; it must reach EOF, not time out.
	_ = b.SetReadDeadline(time.Now().Add(ioTimeout))
	if _, err := io.Copy(io.Discard, b); isTimeout(err) {
		t.Fatal("b still open after Serve returned")
	}
	if st := srv.Stats(); st.StallDisconnects != 0 {
		t.Fatalf("stats = %+v: shutdown must not wait for the stall timeout", st)
	}
	if err := srv.Serve(context.Background(), ln); !errors.Is(err, refrelay.ErrServing) {
		t.Fatalf("second Serve = %v, want ErrServing", err)
	}
}

func TestUDPSocketOnSameAddress(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{})
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testutil.Eventually(t, "a datagram", func() bool {
		_, _ = c.Write([]byte{127, 0, 0, 1, 0, 1})
		return srv.Stats().UDPPackets > 0
	})
}

func TestWaitRegisteredHonoursContext(t *testing.T) {
	srv, _ := refrelaytest.Start(t, refrelay.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := srv.WaitRegistered(ctx, key(9)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitRegistered = %v, want DeadlineExceeded", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		opts refrelay.Options
		ok   bool
	}{
		{"zero value", refrelay.Options{}, true},
		{"custom", refrelay.Options{QueueDepth: 1, WriteStallTimeout: time.Millisecond}, true},
		{"negative depth", refrelay.Options{QueueDepth: -1}, false},
		{"negative stall", refrelay.Options{WriteStallTimeout: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := refrelay.New(tt.opts)
			if (err == nil) != tt.ok || (err != nil && !errors.Is(err, refrelay.ErrOptions)) {
				t.Fatalf("New = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestServeReturnsErrorWhenListenerClosedElsewhere(t *testing.T) {
	srv, err := refrelay.New(refrelay.Options{DisableUDP: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	a := refrelaytest.Register(t, srv, ln.Addr().String(), key(1))
	ln.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Serve = %v, want net.ErrClosed", err)
		}
	case <-time.After(ioTimeout):
		t.Fatal("Serve did not return after its listener closed")
	}
	expectClosed(t, a) // the open session was closed on the way out
}

func TestInjectAndDisconnect(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{})
	a := refrelaytest.Register(t, srv, addr, key(1))
	big := bytes.Repeat([]byte{0xab}, relayproto.MaxBodySize)
	tests := []struct {
		name string
		k    relayproto.Key
		t    relayproto.FrameType
		body []byte
		want error
	}{
		{"relay probe", key(1), relayproto.TypeRelayProbe, []byte("12345678"), nil},
		{"error text", key(1), relayproto.TypeError, []byte("bye"), nil},
		{"largest frame", key(1), relayproto.TypeData, big, nil},
		{"unknown type", key(1), 0x7f, nil, nil},
		{"no session", key(2), relayproto.TypeData, keyBytes(1), refrelay.ErrNotRegistered},
		{"too large", key(1), relayproto.TypeData, append(big, 0), relayproto.ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := srv.Inject(tt.k, tt.t, tt.body)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Inject = %v, want %v", err, tt.want)
			}
			if tt.want != nil {
				return
			}
			f := readFrame(t, a)
			if f.Type != tt.t || !bytes.Equal(f.Body, tt.body) {
				t.Fatalf("got %#v with %d bytes, want %#v with %d", f.Type, len(f.Body), tt.t, len(tt.body))
			}
		})
	}
	if srv.Disconnect(key(2)) {
		t.Fatal("Disconnect of an unregistered key reported a session")
	}
	if !srv.Disconnect(key(1)) {
		t.Fatal("Disconnect found no session")
	}
	expectClosed(t, a)
	testutil.Eventually(t, "session gone", func() bool { return !srv.Registered(key(1)) })
}

func TestInjectQueueFull(t *testing.T) {
	srv, addr := refrelaytest.Start(t, refrelay.Options{QueueDepth: 1, WriteStallTimeout: time.Minute})
	refrelaytest.Register(t, srv, addr, key(1)) // never reads
	payload := make([]byte, 60000)
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = srv.Inject(key(1), relayproto.TypeData, payload)
	}
	if !errors.Is(err, refrelay.ErrQueueFull) || srv.Stats().DroppedQueueFull != 1 {
		t.Fatalf("Inject = %v, stats = %+v; want ErrQueueFull once", err, srv.Stats())
	}
}
