# syntax=docker/dockerfile:1
# One image with every binary users run: wirekube-extauthz, wirekube-bridge,
# wirekube-relay-probe, wirekube-relay-token. The reference relay
# (internal/test/refrelay) is a test fixture and is never built into it.
# Build: make image (or docker build --build-arg VERSION=dev -t ghcr.io/wirekube/relay-ws:dev .)

FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# The version the binaries report (--version, build-info metric); the
# release workflow passes the tag.
ARG VERSION=dev
# Static binaries (no cgo) so they run on distroless/static.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/wirekube/relay-ws/internal/version.Version=${VERSION}" -o /out/ \
      ./extauthz/cmd/wirekube-extauthz \
      ./bridge/cmd/wirekube-bridge \
      ./tools/cmd/wirekube-relay-probe \
      ./tools/cmd/wirekube-relay-token
# The mount point of the revocation socket's volume (docs/revocation.md):
# owned by the runtime user so that a fresh compose volume, which starts as
# a copy of it, is writable for extauthz (Kubernetes emptyDirs are anyway).
RUN mkdir -p /out-run/wirekube-revocation

# No shell, no package manager; runs as uid 65532 (nonroot).
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="wirekube-relay-ws" \
      org.opencontainers.image.source="https://github.com/wirekube/relay-ws" \
      org.opencontainers.image.ref.name="ghcr.io/wirekube/relay-ws" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /out-run/ /run/
USER 65532:65532
# No ENTRYPOINT: the image holds four programs; name one as the command,
# for example /usr/local/bin/wirekube-bridge --help.
