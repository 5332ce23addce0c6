package envoystandin

import (
	"net/http"
	"strings"
)

// stripConnectionNominated removes, before any filter runs, every header the
// client named in its Connection header, as Envoy's HTTP connection manager
// does with hop-by-hop headers of a downstream request (envoyproxy.io,
// configuration/http/http_conn_man/headers: the connection manager edits
// headers while decoding, before the filter chain). Headers ext_authz adds
// later therefore reach the bridge: otherwise `Connection: upgrade,
// x-wirekube-peer` made the reverse proxy drop extauthz's X-WireKube-Peer on
// the way out (the bridge answered 403 and logged an ERROR line any client
// could cause). The upgrade handshake itself is kept: Upgrade and
// `Connection: upgrade` stay when the client asked for an upgrade.
func stripConnectionNominated(h http.Header) {
	upgrade := false
	for _, v := range h.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			tok = strings.TrimSpace(tok)
			if tok == "" {
				continue
			}
			if strings.EqualFold(tok, "upgrade") {
				upgrade = true
				continue
			}
			h.Del(tok)
		}
	}
	h.Del("Connection")
	if upgrade && h.Get("Upgrade") != "" {
		h.Set("Connection", "upgrade")
	}
}
