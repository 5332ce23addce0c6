package envoystandin

import (
	"net/http"
	"strings"
)

// hasUnderscoreHeader reports whether a request header name holds an
// underscore: envoy/envoy.yaml sets headers_with_underscores_action:
// REJECT_REQUEST, so Envoy answers such a request 400 before any filter (an
// X_WireKube_Peer could otherwise reach an upstream that folds underscores
// into dashes).
func hasUnderscoreHeader(h http.Header) bool {
	for name := range h {
		if strings.ContainsRune(name, '_') {
			return true
		}
	}
	return false
}
