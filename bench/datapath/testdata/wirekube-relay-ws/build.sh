#!/usr/bin/env bash
# Builds WireKube's own gateway (wirekube-relay-ws) for the datapath
# benchmark's WIREKUBE_BENCH_WIREKUBE_RELAY_WS path, from a WireKube source
# tree that is not part of this repository (its module is not on the Go
# module proxy this project's machines reach):
#
#   bench/datapath/testdata/wirekube-relay-ws/build.sh WIREKUBE_SRC OUT
#
# Taken from WIREKUBE_SRC unchanged: pkg/relay/protocol.go (frames),
# pkg/relay/wsconn.go (WebSocket as a byte stream) and
# pkg/relay/wsgateway/server.go (Upgrader, Register check, the two io.Copy
# pumps, ListenAndServe with Go TLS): the whole data path. Replaced, because
# they need a cluster: auth.go (TokenReview and WireKubePeer lookup, once per
# session before the upgrade) by auth_standin.go.in, and cmd/relay-ws's main
# (in-cluster clients, flags) by main.go.in, which speaks the bench's child
# protocol. gorilla/websocket is the version this repository's go.mod pins.
set -euo pipefail
src=$1
out=$(realpath -m "$2")
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pkg/relay/wsgateway" "$work/cmd/relay-ws-bench"
cp "$src/pkg/relay/protocol.go" "$src/pkg/relay/wsconn.go" "$work/pkg/relay/"
cp "$src/pkg/relay/wsgateway/server.go" "$work/pkg/relay/wsgateway/"
# The module path the copied files import (WireKube moved from
# github.com/wirekube/wirekube to github.com/inerplat/wirekube): the stand-ins
# are written against the old one and rewritten to the tree's own.
module=$(awk '$1 == "module" {print $2; exit}' "$src/go.mod" 2>/dev/null)
module=${module:-github.com/wirekube/wirekube}
sed "s#github.com/wirekube/wirekube/#$module/#" "$here/auth_standin.go.in" >"$work/pkg/relay/wsgateway/auth_standin.go"
sed "s#github.com/wirekube/wirekube/#$module/#" "$here/main.go.in" >"$work/cmd/relay-ws-bench/main.go"
gorilla=$(awk '$1 == "github.com/gorilla/websocket" {print $2}' "$repo/go.mod")
printf 'module %s\n\ngo 1.23\n\nrequire github.com/gorilla/websocket %s\n' "$module" "$gorilla" >"$work/go.mod"
cp "$repo/go.sum" "$work/go.sum" # the checksums of the versions resolved below
(cd "$work" && GOFLAGS=-mod=mod go mod tidy && go build -o "$out" ./cmd/relay-ws-bench)
echo "built $out"
