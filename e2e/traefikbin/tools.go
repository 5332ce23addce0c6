//go:build tools

// Package traefikbin pins the Traefik command for `go mod tidy`; nothing here
// is compiled into the suite.
package traefikbin

import _ "github.com/traefik/traefik/v3/cmd/traefik"
