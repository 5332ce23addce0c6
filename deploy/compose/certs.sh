#!/bin/sh
# One-shot: a throwaway self-signed certificate for Envoy's TLS listener,
# made with the Go standard library's generator (the build image has Go).
# The probe trusts it with --ca-file; nothing else should.
set -eu
cd /tls
if [ -s tls.crt ] && [ -s tls.key ]; then
  echo "certs: reusing the certificate in the tls volume"
  exit 0
fi
go run "$(go env GOROOT)/src/crypto/tls/generate_cert.go" \
  --host envoy,localhost,127.0.0.1 --ecdsa-curve P256 --ca --duration 720h
mv cert.pem tls.crt
mv key.pem tls.key
chmod 0644 tls.crt
chmod 0600 tls.key
# Envoy runs as uid 65532 in this stack.
chown 65532:65532 tls.crt tls.key
echo "certs: wrote tls.crt and tls.key"
