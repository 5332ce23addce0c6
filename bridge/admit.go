package bridge

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/bridge/internal/identitycheck"
	"github.com/wirekube/relay-ws/bridge/internal/peerlimit"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/logging"
)

// handleRelay admits a request on the relay path, dials the relay, upgrades
// and serves the session. Every check that can fail runs before the upgrade
// so a deny is an HTTP status with X-WireKube-Deny-Reason.
func (s *Server) handleRelay(w http.ResponseWriter, r *http.Request) {
	if isBounceAnswer(r.Header) { // extauthz bounced it before any TokenReview (bounce.go)
		if reason, err := s.checkBounceAnswer(r); reason != "" {
			s.deny(w, r, knownIdentity(r.Header), reason, err)
			return
		}
		s.bounce(w, r, knownIdentity(r.Header), BounceByAuthz)
		return
	}
	id, nonce, reason, err := s.admit(r)
	if reason != "" {
		s.deny(w, r, id, reason, err)
		return
	}
	probe := isProbe(r)
	if !probe && s.drawBounce() { // past the full mark: steer it to another replica (bounce.go)
		s.bounce(w, r, id, BounceByBridge)
		return
	}
	ticket, reason := s.takeRoom(w, &id, probe)
	if reason != "" {
		s.deny(w, r, id, reason, nil)
		return
	}
	relay, reason, err := s.connectRelay(r.Context()) // may hold (hold.go)
	if reason != "" {
		ticket.Release()
		s.deny(w, r, id, reason, err)
		return
	}
	if reason, err := s.signatures.Spend(nonce, id.Peer); reason != "" { // the point of no return
		s.abandon(relay, ticket)
		s.deny(w, r, id, reason, err)
		return
	}
	s.upgrade(w, r, id, relay, ticket, probe)
}

// takeRoom checks that this bridge could end the session (the revocation
// stream vouches), that no other live binding holds the key, and takes the
// peer's share: the ticket, or the reason to deny.
func (s *Server) takeRoom(w http.ResponseWriter, id *peerIdentity, probe bool) (*peerlimit.Ticket, contract.Reason) {
	if !s.revoker.Vouching() { // it could not end this session if it had to
		return nil, contract.ReasonRevocationUnavailable
	}
	if !probe { // a probe registers nothing: it takes no key from anyone
		if holder := s.owners.heldByOther(id); holder != nil {
			s.logKeyHeld(*id, holder.id, "upgrade")
			return nil, contract.ReasonKeyHeldByOtherBinding
		}
	}
	return s.peers.admit(w, *id, probe)
}

// upgrade answers 101 and hands the connection to its session (or probe)
// goroutine; a failed upgrade gives back what the request held.
func (s *Server) upgrade(w http.ResponseWriter, r *http.Request, id peerIdentity, relay net.Conn, ticket *peerlimit.Ticket, probe bool) {
	upgrader := &s.upgrader
	if probe {
		upgrader = &s.probeUpgrader
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		s.abandon(relay, ticket) // the upgrader has answered through upgradeError
		return
	}
	if probe {
		_ = relay.Close() // reached, and never written to (probemode.go)
		go func() {
			defer s.releaseSlot()
			defer ticket.Release() // after a failed verdict too; later calls do nothing
			s.serveProbe(ws, id, r.RemoteAddr, ticket.Release)
		}()
		return
	}
	// The session gets its own goroutine so that this handler returns and
	// net/http frees what it holds per connection (its buffers and the
	// serve goroutine's stack, ~10 KiB), which matters for idle sessions.
	// The slot taken above accounts for it: Drain waits for every slot.
	go s.serveSession(ws, relay, id, r.RemoteAddr, ticket) // finishSession releases the slot
}

// abandon gives back what an admitted request held once it will not be
// upgraded: the relay connection, its global slot and the peer's share.
func (s *Server) abandon(relay net.Conn, ticket *peerlimit.Ticket) {
	_ = relay.Close()
	s.releaseSlot()
	ticket.Release()
}

// admit runs the checks that need no relay: method, body, upgrade headers,
// identity, origin, subprotocol; the signature's nonce is checked unused
// here and spent in handleRelay. Any failure is a deny: fail closed. On a
// deny the identity returned is what is known for the log line: the
// request id always, the peer and identity when their headers were valid.
func (s *Server) admit(r *http.Request) (peerIdentity, identitycheck.Verified, contract.Reason, error) {
	known := knownIdentity(r.Header)
	if reason, err := checkUpgradeRequest(r); reason != "" {
		return known, identitycheck.Verified{}, reason, err
	}
	id, err := parseIdentity(r.Header)
	if err == nil {
		err = parseBinding(r.Header, &id, s.revoker.Enabled())
	}
	if err == nil {
		err = parseClientAddress(r.Header, &id)
	}
	if err != nil {
		return known, identitycheck.Verified{}, contract.ReasonIdentityHeaderInvalid, err
	}
	nonce, reason, err := s.signatures.Check(r.Header, id.Peer, id.Subject, id.Binding)
	if reason != "" {
		return known, nonce, reason, err
	}
	id.RequestID = known.RequestID
	known.ClientAddress = id.ClientAddress // signed (or the check is off)
	if !s.originAllowed(r) {
		return known, nonce, contract.ReasonOriginNotAllowed, errors.New("origin not allowed")
	}
	if offered := websocket.Subprotocols(r); len(offered) > 0 && !slices.Contains(offered, contract.Subprotocol) &&
		!slices.Contains(offered, contract.SubprotocolProbe) {
		return known, nonce, contract.ReasonSubprotocol, offeredError(offered)
	}
	return id, nonce, "", nil
}

// checkUpgradeRequest checks the request line and upgrade headers: a GET
// without a body, a version 13 WebSocket upgrade with a valid key.
func checkUpgradeRequest(r *http.Request) (contract.Reason, error) {
	switch {
	case r.Method != http.MethodGet:
		// The answer extauthz gives through every front (it sees the
		// method first): one code for "not a GET upgrade" wherever it is
		// decided.
		return contract.ReasonNotWebSocket, fmt.Errorf("method %s", r.Method)
	case r.ContentLength != 0 || len(r.TransferEncoding) > 0:
		return contract.ReasonRequestBody, errors.New("request has a body")
	case !websocket.IsWebSocketUpgrade(r) || r.Header.Get("Sec-WebSocket-Version") != "13" ||
		!validChallengeKey(r.Header.Get("Sec-WebSocket-Key")):
		// The upgrader's own checks, so that it never refuses after
		// the nonce is spent: a spent nonce means a 101.
		return contract.ReasonNotWebSocket, errors.New("not a version 13 WebSocket upgrade")
	}
	return "", nil
}

// validChallengeKey is the upgrader's test of Sec-WebSocket-Key: base64 of
// 16 bytes (RFC 6455 section 4.1).
func validChallengeKey(k string) bool {
	if len(k) != 24 {
		return false
	}
	var b [18]byte
	n, err := base64.StdEncoding.Decode(b[:], []byte(k))
	return err == nil && n == 16
}

// knownIdentity is what a deny line can name before the checks ran: the
// front's request id (checked, logging.RequestID) and, when the identity
// headers are well formed, the peer and identity (set by the proxy from the
// ext_authz answer, never by the client).
func knownIdentity(h http.Header) peerIdentity {
	id, err := parseIdentity(h)
	if err != nil {
		id = peerIdentity{}
	}
	id.RequestID = logging.RequestID(h.Values(contract.HeaderRequestID))
	id.ClientAddress = clientUnverified
	return id
}

// offeredError describes refused subprotocols by their count and lengths
// only: a client may offer anything there, a bearer token included
// (Kubernetes-style clients send base64url.bearer.authorization.k8s.io.<token>).
func offeredError(offered []string) error {
	lens := make([]int, len(offered))
	for i, p := range offered {
		lens[i] = len(p)
	}
	return fmt.Errorf("offered %d subprotocols, none ours (lengths %v)", len(offered), lens)
}

// originAllowed accepts a request without Origin (the agent sends none) or
// one whose every Origin value is listed in --allowed-origins.
func (s *Server) originAllowed(r *http.Request) bool {
	for _, o := range r.Header.Values("Origin") {
		if !s.cfg.origins[o] {
			return false
		}
	}
	return true
}

// deny answers a refused request and counts it. Identity header failures
// are logged at error level: they mean the proxy is misconfigured. The log
// line names the peer and identity when known (id), the front's request id,
// and no client-supplied header value (no token, no key).
func (s *Server) deny(w http.ResponseWriter, r *http.Request, id peerIdentity, reason contract.Reason, err error) {
	s.metrics.rejects.WithLabelValues(string(reason)).Inc()
	level := slog.LevelInfo
	if reason == contract.ReasonIdentityHeaderInvalid {
		level = slog.LevelError
	} else if identitycheck.Refusal(reason) {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("reason", string(reason)), slog.String("peer", id.Peer),
		slog.String("identity", id.Subject), slog.String("request_id", id.RequestID),
		slog.String("client_address", id.ClientAddress), slog.String("remote", r.RemoteAddr), slog.String("method", r.Method), slog.String("path", r.URL.Path)}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	s.log.LogAttrs(r.Context(), level, "request denied", attrs...)
	writeDeny(w, reason)
}

func writeDeny(w http.ResponseWriter, reason contract.Reason) {
	h := w.Header()
	h.Set(contract.HeaderDenyReason, string(reason))
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	if st := reason.HTTPStatus(); (st == http.StatusServiceUnavailable || st == http.StatusTooManyRequests) &&
		h.Get("Retry-After") == "" {
		h.Set("Retry-After", "1") // the agent ignores it; other clients may not
	}
	w.WriteHeader(reason.HTTPStatus())
	_, _ = fmt.Fprintln(w, reason)
}

// upgradeError is the upgrader's error answer. admit has already checked
// what the upgrader checks, so this is a fallback; it still carries a reason.
func (s *Server) upgradeError(w http.ResponseWriter, r *http.Request, status int, err error) {
	reason := contract.ReasonNotWebSocket
	if status == http.StatusForbidden {
		reason = contract.ReasonOriginNotAllowed
	}
	s.deny(w, r, knownIdentity(r.Header), reason, err)
}
