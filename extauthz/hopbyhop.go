package extauthz

import "net/http"

// Proxies that build their own auth request from the client's drop the
// hop-by-hop headers (Upgrade, Connection) on the way: ingress-nginx's
// auth-url location (it sets X-Original-URL and nginx's proxy module then
// writes `Connection: close` for its own hop), Traefik ForwardAuth and Caddy
// forward_auth (X-Forwarded-Method/-Uri). What such an auth request carries in
// Upgrade and Connection describes the proxy's hop to this service, not the
// client's request, so the HTTP mode cannot require them there.
//
// What still holds for those proxies: the original method must be GET, an
// Upgrade header that is present must say websocket, and the request must not
// carry a body. The upgrade itself (Upgrade: websocket, a Connection upgrade
// token, Sec-WebSocket-Version 13 and a key) is checked by the bridge on every
// request it receives, whichever front sent it: a request that is allowed here
// but is no upgrade is refused there with 400 not_websocket (the e2e front
// matrix shows it per front).
var strippingProxyHeaders = [...]string{"X-Forwarded-Method", "X-Forwarded-Uri", "X-Original-Url"}

// forwardsHopByHop reports whether the auth request follows a convention
// whose proxy passes the client's Upgrade and Connection (the shipped nginx
// snippet sets both explicitly and clears the other conventions; Envoy
// http_service has no convention header). A client cannot use this to skip a
// check: the bridge repeats the upgrade check for every front.
func forwardsHopByHop(h http.Header) bool {
	for _, name := range strippingProxyHeaders {
		if len(h.Values(name)) > 0 {
			return false
		}
	}
	return true
}
