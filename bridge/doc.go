// Package bridge is the WebSocket-to-relay bridge of the WireKube WSS gateway.
//
// A proxy in front of it (Envoy or nginx) terminates TLS and asks ext_authz
// whether the upgrade may proceed; on allow, the proxy forwards the upgrade
// with the identity headers of docs/spec.md#identity-headers. The bridge checks the request
// (method, body, origin, subprotocol, identity headers), dials the raw TCP
// relay, upgrades, verifies that the first relay frame registers exactly the
// public key the proxy vouched for, and then copies relay frames both ways:
//
//	client (binary WebSocket messages, a byte stream) -> frame filter -> relay (TCP)
//	relay (TCP) -> whole frames, coalesced when already buffered -> client
//
// Every deny that can be decided before the upgrade is an HTTP status with
// an X-WireKube-Deny-Reason header, never an upgrade followed by a close:
// the WireKube agent would log a false "connected" and loop.
//
// gorilla/websocket performs the handshake and writes to the client; the
// bridge reads the client's frames itself (wsdecode.go) so that it can wait
// for data without holding a buffer and read many messages per system call.
// Per session it runs a reader goroutine for each side while that side has
// traffic (a side idle for a second gives its goroutine up to a poller
// shared by all sessions: park.go) and two timers (register deadline,
// pings); the revocation client (internal/revocationclient) holds a third,
// its token expiry. Buffers are borrowed from a pool only while bytes are
// in flight, so an idle session holds no goroutine and no buffer.
package bridge
