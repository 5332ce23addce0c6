package datapath

import (
	"context"
	"io"
	"net"
	"sync"
)

// forwarder is the floor of any gateway process: a plain TCP forwarder
// with no WebSocket, no filter and no timers, one io.Copy each way per
// connection. A round trip through it costs what waking one more process
// per hop costs on this machine, which no gateway in its own process can
// beat; the round-trip benchmark prints it beside the bridge.
type forwarder struct{ relayAddr string }

func (f forwarder) serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() { // owned: serve waits for it
			defer wg.Done()
			f.forward(ctx, c)
		}()
	}
}

func (f forwarder) forward(ctx context.Context, c net.Conn) {
	defer c.Close()
	r, err := (&net.Dialer{}).DialContext(ctx, "tcp", f.relayAddr)
	if err != nil {
		return
	}
	defer r.Close()
	stop := context.AfterFunc(ctx, func() { c.Close(); r.Close() })
	defer stop()
	done := make(chan struct{})
	go func() { // owned: forward waits for it
		defer close(done)
		_, _ = io.Copy(r, c)
		r.Close()
	}()
	_, _ = io.Copy(c, r)
	c.Close()
	<-done
}
