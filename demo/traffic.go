package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// ioTimeout bounds every single read and credit wait of the traffic steps.
const ioTimeout = 5 * time.Second

// window is how many Data frames a sender keeps in flight. The raw relay
// queues 256 frames per destination and silently drops the newest beyond
// that, so a sender that outran its reader would lose frames by design.
const window = 64

// maxPayload is the largest Data payload: a 65,536-byte frame minus the
// type byte and the destination key.
const maxPayload = relayproto.MaxFrameSize - 1 - relayproto.KeySize

// payloadSize cycles through a typical WireGuard packet, a mid-size one and
// the largest frame (which the agent splits into two WebSocket messages).
func payloadSize(seq uint64) int {
	switch seq % 3 {
	case 0:
		return 1400
	case 1:
		return 16384
	}
	return maxPayload
}

// endMarker starts the in-band last frame of a stream; it is followed by
// the number of frames sent.
const endMarker = math.MaxUint64

// echo proves a session is live: a Data frame to one's own key comes back
// through the relay.
func echo(c *testagent.Conn, self relayproto.Key) error {
	payload := make([]byte, 32)
	rand.Read(payload)
	if err := c.SendData(self, payload); err != nil {
		return err
	}
	src, got, err := c.ReadData(ioTimeout)
	if err != nil {
		return fmt.Errorf("echo: %w", err)
	}
	if !src.Equal(self) || !bytes.Equal(got, payload) {
		return errors.New("echo: the relay returned another payload")
	}
	return nil
}

// payload builds frame seq of a stream: the sequence number, then bytes of
// pattern chosen by seq, so the receiver can rebuild and compare it.
func payload(dst []byte, seq uint64, pattern []byte) []byte {
	size := payloadSize(seq)
	off := int(seq*131) % (len(pattern) - size)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	return append(dst, pattern[off:off+size-8]...)
}

// flow is one direction of a stream.
type flow struct {
	from, to   *testagent.Conn
	fromKey    relayproto.Key
	toKey      relayproto.Key
	pattern    []byte
	credits    chan struct{}
	bytes      int64
	frames     int
	sendErr    error
	receiveErr error
}

// send streams until deadline, never more than window frames ahead of the
// receiver, then sends the end marker.
func (f *flow) send(ctx context.Context, deadline time.Time) {
	var buf []byte
	seq := uint64(0)
	for ; time.Now().Before(deadline); seq++ {
		select {
		case f.credits <- struct{}{}:
		case <-time.After(ioTimeout):
			f.sendErr = errors.New("receiver stalled: no credit within 5s")
			return
		case <-ctx.Done():
			f.sendErr = ctx.Err()
			return
		}
		buf = payload(buf[:0], seq, f.pattern)
		if err := f.from.SendData(f.toKey, buf); err != nil {
			f.sendErr = err
			return
		}
	}
	end := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, endMarker), seq)
	f.sendErr = f.from.SendData(f.toKey, end)
}

// receive checks every frame until the end marker: from the right key,
// in order, byte for byte.
func (f *flow) receive() {
	var want []byte
	for seq := uint64(0); ; seq++ {
		src, got, err := f.to.ReadData(ioTimeout)
		if err != nil {
			f.receiveErr = fmt.Errorf("frame %d: %w", seq, err)
			return
		}
		if !src.Equal(f.fromKey) {
			f.receiveErr = fmt.Errorf("frame %d from %s, want %s", seq, src, f.fromKey)
			return
		}
		if len(got) == 16 && binary.BigEndian.Uint64(got) == endMarker {
			if n := binary.BigEndian.Uint64(got[8:]); n != seq {
				f.receiveErr = fmt.Errorf("end after %d frames, the sender sent %d", seq, n)
			}
			return
		}
		want = payload(want[:0], seq, f.pattern)
		if !bytes.Equal(got, want) {
			f.receiveErr = fmt.Errorf("frame %d: %d bytes differ from the %d sent (lost, reordered or corrupted)", seq, len(got), len(want))
			return
		}
		f.bytes += int64(len(got))
		f.frames++
		<-f.credits
	}
}

// stream runs a->b and b->a at once for d and verifies every payload.
func stream(ctx context.Context, a, b *testagent.Conn, ka, kb relayproto.Key, d time.Duration) (Traffic, error) {
	pattern := make([]byte, 4*maxPayload)
	rand.Read(pattern)
	ab := &flow{from: a, to: b, fromKey: ka, toKey: kb, pattern: pattern, credits: make(chan struct{}, window)}
	ba := &flow{from: b, to: a, fromKey: kb, toKey: ka, pattern: pattern, credits: make(chan struct{}, window)}
	start := time.Now()
	deadline := start.Add(d)
	done := make(chan struct{})
	for _, f := range []*flow{ab, ba} {
		go func() { f.send(ctx, deadline); done <- struct{}{} }()
		go func() { f.receive(); done <- struct{}{} }()
	}
	for range 4 { // wait for all four goroutines: each ends on its own timeout at worst
		<-done
	}
	t := Traffic{Duration: time.Since(start), BytesAB: ab.bytes, BytesBA: ba.bytes, FramesAB: ab.frames, FramesBA: ba.frames}
	var errs []error
	for _, f := range []struct {
		name string
		f    *flow
	}{{"a->b", ab}, {"b->a", ba}} {
		if f.f.sendErr != nil {
			errs = append(errs, fmt.Errorf("%s send: %w", f.name, f.f.sendErr))
		}
		if f.f.receiveErr != nil {
			errs = append(errs, fmt.Errorf("%s receive: %w", f.name, f.f.receiveErr))
		}
	}
	return t, errors.Join(errs...)
}

// roundTrips times n small Data frames a->b->a; b echoes each back.
func roundTrips(a, b *testagent.Conn, ka, kb relayproto.Key, n int) ([]time.Duration, error) {
	echoErr := make(chan error, 1)
	go func() { // owned: its result is always received below
		for range n {
			src, got, err := b.ReadData(ioTimeout)
			if err == nil && !src.Equal(ka) {
				err = fmt.Errorf("round trip: frame from %s, want %s", src, ka)
			}
			if err == nil {
				err = b.SendData(ka, got)
			}
			if err != nil {
				echoErr <- err
				return
			}
		}
		echoErr <- nil
	}()
	rtts := make([]time.Duration, 0, n)
	var err error
	for i := range n {
		p := binary.BigEndian.AppendUint64(make([]byte, 0, 64), uint64(i))
		p = append(p, make([]byte, 56)...)
		start := time.Now()
		if err = a.SendData(kb, p); err != nil {
			break
		}
		var got []byte
		if _, got, err = a.ReadData(ioTimeout); err != nil {
			break
		}
		if !bytes.Equal(got, p) {
			err = fmt.Errorf("round trip %d: payload changed", i)
			break
		}
		rtts = append(rtts, time.Since(start))
	}
	if err != nil {
		// b may wait for a frame that never comes; its read times out.
		return rtts, errors.Join(err, <-echoErr)
	}
	return rtts, <-echoErr
}

// percentile is the nearest-rank percentile (0 < p <= 1) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// rttStats fills the round-trip fields of t.
func rttStats(t *Traffic, rtts []time.Duration) {
	s := slices.Clone(rtts)
	slices.Sort(s)
	t.RTTs, t.RTTP50, t.RTTP99 = len(s), percentile(s, 0.50), percentile(s, 0.99)
}
