package datapath

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/wirekube/relay-ws/relayproto"
)

// throughput has a and b send frames Data frames of size payload bytes to
// each other at once, each keeping at most window frames unreceived, and
// returns the payload rate both ways together in MB/s (10^6 bytes).
func throughput(a, b peer, ka, kb relayproto.Key, frames, size, window int) (float64, error) {
	deadline := time.Now().Add(2 * time.Minute)
	a.setDeadline(deadline)
	b.setDeadline(deadline)
	aToB, bToA := make(chan struct{}, window), make(chan struct{}, window)
	errc := make(chan error, 4)
	start := time.Now()
	go func() { errc <- sendN(a, kb, frames, size, aToB) }()
	go func() { errc <- sendN(b, ka, frames, size, bToA) }()
	go func() { errc <- recvN(b, ka, frames, aToB) }()
	go func() { errc <- recvN(a, kb, frames, bToA) }()
	var errs []error
	for range 4 {
		if err := <-errc; err != nil {
			errs = append(errs, err)
			a.close() // unblock the others
			b.close()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	elapsed := time.Since(start)
	return float64(2*frames*size) / elapsed.Seconds() / 1e6, nil
}

// sendN sends numbered frames, taking a window slot for each.
func sendN(p peer, dst relayproto.Key, frames, size int, window chan struct{}) error {
	payload := make([]byte, size)
	frame := make([]byte, 0, relayproto.HeaderSize+relayproto.KeySize+size)
	for i := range frames {
		window <- struct{}{}
		binary.BigEndian.PutUint32(payload, uint32(i))
		if err := p.send(relayproto.AppendData(frame[:0], dst, payload)); err != nil {
			return fmt.Errorf("send %d: %w", i, err)
		}
	}
	return nil
}

// recvN receives frames in order from src, freeing a window slot for each.
func recvN(p peer, src relayproto.Key, frames int, window chan struct{}) error {
	for i := range frames {
		f, err := p.recv()
		if err != nil {
			return fmt.Errorf("recv %d: %w", i, err)
		}
		k, payload, err := relayproto.ParseData(f.Body)
		if err != nil || k != src || len(payload) < 4 || binary.BigEndian.Uint32(payload) != uint32(i) {
			return fmt.Errorf("frame %d: out of order, lost or corrupt (%#v)", i, f.Type)
		}
		<-window
	}
	return nil
}

// pingPong has a send a small Data frame to b and b send it back, n times
// after warm round trips, and returns the sorted round trip times.
func pingPong(a, b peer, ka, kb relayproto.Key, n, warm, size int) ([]time.Duration, error) {
	deadline := time.Now().Add(time.Minute)
	a.setDeadline(deadline)
	b.setDeadline(deadline)
	echoErr := make(chan error, 1)
	go func() {
		frame := make([]byte, 0, 128)
		for range n + warm {
			f, err := b.recv()
			if err != nil {
				echoErr <- err
				return
			}
			_, payload, _ := relayproto.ParseData(f.Body)
			if err := b.send(relayproto.AppendData(frame[:0], ka, payload)); err != nil {
				echoErr <- err
				return
			}
		}
		echoErr <- nil
	}()
	rtts := make([]time.Duration, 0, n)
	payload, frame := make([]byte, size), make([]byte, 0, 128)
	for i := range n + warm {
		binary.BigEndian.PutUint32(payload, uint32(i))
		t0 := time.Now()
		if err := a.send(relayproto.AppendData(frame[:0], kb, payload)); err != nil {
			return nil, err
		}
		f, err := a.recv()
		if err != nil {
			return nil, err
		}
		rtt := time.Since(t0)
		if _, p, _ := relayproto.ParseData(f.Body); len(p) != size || binary.BigEndian.Uint32(p) != uint32(i) {
			return nil, fmt.Errorf("ping %d: wrong echo", i)
		}
		if i >= warm {
			rtts = append(rtts, rtt)
		}
	}
	if err := <-echoErr; err != nil {
		return nil, fmt.Errorf("echo: %w", err)
	}
	slices.Sort(rtts)
	return rtts, nil
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}
