//go:build e2e

package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// sentinels are two sessions that live through every scenario of a front:
// after each scenario they must still exchange Data both ways.
type sentinels struct {
	a, b   *testagent.Conn
	ka, kb relayproto.Key
}

func (e *env) newSentinels(t *testing.T, f front) *sentinels {
	ida, idb := e.podAgent(t, peerName(f, "sentinel-a")), e.podAgent(t, peerName(f, "sentinel-b"))
	return &sentinels{a: session(t, f, ida), b: session(t, f, idb), ka: ida.key, kb: idb.key}
}

func (s *sentinels) check(t *testing.T) {
	t.Helper()
	if t.Failed() {
		return // the scenario already failed; do not pile up errors
	}
	exchange(t, s.a, s.b, s.ka, s.kb)
	exchange(t, s.b, s.a, s.kb, s.ka)
}

// payloadSizes covers small frames, a full single message and the largest
// Data frame (65,540 bytes encoded with the 4-byte sequence number: the agent
// splits it in two messages).
var payloadSizes = []int{1, 100, 1400, 9000, 65000, relayproto.MaxFrameSize - 1 - relayproto.KeySize - 4}

// streamBothWays sends n numbered payloads each way at once and checks that
// each side receives every payload intact, in order, from the other's key.
func streamBothWays(t *testing.T, a, b *testagent.Conn, ka, kb relayproto.Key, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, dir := range []struct {
		from, to   *testagent.Conn
		kfrom, kto relayproto.Key
		name       string
	}{{a, b, ka, kb, "a->b"}, {b, a, kb, ka, "b->a"}} {
		payloads := make([][]byte, n)
		for i := range payloads {
			payloads[i] = binary.BigEndian.AppendUint32(nil, uint32(i))
			payloads[i] = append(payloads[i], randomBytes(payloadSizes[i%len(payloadSizes)])...)
		}
		wg.Add(2)
		go func() { // sender, owned by this function's wg.Wait
			defer wg.Done()
			for _, p := range payloads {
				if err := dir.from.SendData(dir.kto, p); err != nil {
					errs <- fmt.Errorf("%s send: %w", dir.name, err)
					return
				}
			}
		}()
		go func() { // receiver
			defer wg.Done()
			for i, want := range payloads {
				src, got, err := dir.to.ReadData(ioTimeout)
				if err != nil {
					errs <- fmt.Errorf("%s receive #%d: %w", dir.name, i, err)
					return
				}
				if !src.Equal(dir.kfrom) || !bytes.Equal(got, want) {
					errs <- fmt.Errorf("%s #%d: got %d bytes from %s, want %d bytes from %s (seq %d)",
						dir.name, i, len(got), src, len(want), dir.kfrom, binary.BigEndian.Uint32(got))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func (e *env) testPodBoundExchange(t *testing.T, f front) {
	a, b := e.podAgent(t, peerName(f, "s1-pod-a")), e.podAgent(t, peerName(f, "s1-pod-b"))
	streamBothWays(t, session(t, f, a), session(t, f, b), a.key, b.key, 120)
}

func (e *env) testPeerSAExchange(t *testing.T, f front) {
	a := e.peerSAIdentity(t, peerName(f, "s1-sa-a"), true, "")
	b := e.peerSAIdentity(t, peerName(f, "s1-sa-b"), true, "")
	streamBothWays(t, session(t, f, a), session(t, f, b), a.key, b.key, 60)
}

func (e *env) testNodeBoundExchange(t *testing.T, f front) {
	a := e.nodeAgent(t, peerName(f, "s1-node-a"))
	b := e.podAgent(t, peerName(f, "s1-node-b"))
	streamBothWays(t, session(t, f, a), session(t, f, b), a.key, b.key, 60)
}
