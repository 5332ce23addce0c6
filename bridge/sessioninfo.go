package bridge

import (
	"strconv"
	"time"

	"github.com/wirekube/relay-ws/bridge/internal/sessionlist"
	"github.com/wirekube/relay-ws/internal/contract"
)

// newListing is the session listing of --debug-sessions, its page write
// bounded by --write-timeout and its refusals written as every deny of the
// bridge; nil without the flag (nothing is indexed, nothing served).
func newListing(cfg *Config) *sessionlist.Listing {
	if !cfg.DebugSessions {
		return nil
	}
	return sessionlist.New(cfg.WriteTimeout, writeDeny)
}

// A session is listed (bridge/internal/sessionlist) as a sessionlist.Session:
// its seq and identity are set before the listing's Add and never change,
// its counters are atomic, so no lock is needed.

// Seq names the session in the listing.
func (sess *session) Seq() uint64 { return sess.seq }

// Peer is the WireKubePeer the session was admitted for.
func (sess *session) Peer() string { return sess.id.Peer }

// Info is the session's listing entry. Never the whole key.
func (sess *session) Info() contract.SessionInfo {
	return contract.SessionInfo{
		ID:             strconv.FormatUint(sess.seq, 10),
		Peer:           sess.id.Peer,
		Identity:       sess.id.Subject,
		Key:            sess.id.Key.Fingerprint(),
		ClientAddress:  sess.id.ClientAddress,
		Since:          sess.start.UTC().Format(time.RFC3339),
		Expires:        sess.id.TokenExpires.UTC().Format(time.RFC3339),
		RequestID:      sess.id.RequestID,
		BytesToRelay:   sess.bytesToRelay.Load(),
		BytesToClient:  sess.bytesToClient.Load(),
		FramesToRelay:  sess.framesToRelay.Load(),
		FramesToClient: sess.framesToClient.Load(),
	}
}
