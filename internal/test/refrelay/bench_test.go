package refrelay_test

import (
	"bufio"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/test/refrelay"
	"github.com/wirekube/relay-ws/internal/test/refrelay/refrelaytest"
	"github.com/wirekube/relay-ws/relayproto"
)

// BenchmarkForward1400 measures one-way forwarding of 1,400-byte Data
// frames between two peers over loopback, with a window of frames in flight
// kept under the queue depth so nothing is dropped.
func BenchmarkForward1400(b *testing.B) {
	const window = 128
	srv, addr := refrelaytest.Start(b, refrelay.Options{Logger: slog.New(slog.DiscardHandler)})
	src := refrelaytest.Register(b, srv, addr, key(1))
	dst := refrelaytest.Register(b, srv, addr, key(2))
	frame := relayproto.AppendData(nil, key(2), make([]byte, 1400))
	b.SetBytes(1400)
	done := make(chan error, 1)
	credits := make(chan struct{}, window)
	for range window {
		credits <- struct{}{}
	}
	go func() {
		r := relayproto.NewReader(bufio.NewReaderSize(dst, 64<<10))
		for range b.N {
			if _, err := r.ReadFrame(); err != nil {
				done <- err
				return
			}
			credits <- struct{}{}
		}
		done <- nil
	}()
	_ = src.SetWriteDeadline(time.Now().Add(time.Minute))
	for range b.N {
		<-credits
		if _, err := src.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil && err != io.EOF {
		b.Fatal(err)
	}
	if d := srv.Stats().DroppedQueueFull; d != 0 {
		b.Fatalf("%d frames dropped", d)
	}
}
