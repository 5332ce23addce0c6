# WireKube WSS relay gateway. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
BIN ?= $(CURDIR)/bin
STATICCHECK_VERSION ?= v0.8.2
ACTIONLINT_VERSION ?= v1.7.12
ACTIONLINT := $(CURDIR)/e2e/.cache/actionlint/$(ACTIONLINT_VERSION)/actionlint
FUZZTIME ?= 10s
# protoc comes from the distribution (Debian protobuf-compiler); its plugins
# are built from the Go module proxy, pinned (protoc-gen-go at the
# google.golang.org/protobuf version of go.mod), cached per version.
PROTOC_GEN_GO_VERSION ?= v1.36.12
PROTOC_GEN_GO_GRPC_VERSION ?= v1.6.2
PROTOC_PLUGINS := $(CURDIR)/e2e/.cache/protoc-plugins/go-$(PROTOC_GEN_GO_VERSION)-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)
PROTO_DIR := internal/revocation/revocationpb
# The binaries users run. The reference relay is a test fixture and is built
# only into bin/ for the tests and the demo, never into an image.
BINARIES := ./bridge/cmd/wirekube-bridge ./extauthz/cmd/wirekube-extauthz \
	./tools/cmd/wirekube-relay-probe ./tools/cmd/wirekube-relay-token
FIXTURES := ./internal/test/refrelay/cmd/wirekube-refrelay
# The version every binary reports (--version, first log line,
# wirekube_build_info); the image is tagged with it. One source:
# internal/version.Release, which the chart and manifests/base pin too.
VERSION ?= $(shell sed -n 's/^const Release = "\(.*\)"$$/\1/p' internal/version/version.go)
LDFLAGS := -X github.com/wirekube/relay-ws/internal/version.Version=$(VERSION)

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@grep -hE '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  %-12s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build every binary (and the test fixture relay) into bin/.
	@mkdir -p $(BIN)
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ $(wildcard $(BINARIES)) $(FIXTURES)

.PHONY: test
test: lint test-unit e2e ## Everything CI runs: lint, unit tests with -race, the e2e suite.

.PHONY: test-unit
test-unit: ## Unit tests with the race detector, then the allocation guards without it.
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run 'Allocs$$' ./bridge/ ./extauthz/

.PHONY: lint
lint: actionlint proto-check tidy-check ## gofmt check, go vet, pinned staticcheck, actionlint, generated code and go.mod up to date.
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/... ./demo/...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) -tags e2e ./e2e/... ./demo/...

.PHONY: tidy-check
tidy-check: ## Fail when go.mod or go.sum differ from what `go mod tidy` writes (a direct import marked indirect, a stale require).
	$(GO) mod tidy -diff

.PHONY: proto
proto: $(PROTOC_PLUGINS)/protoc-gen-go-grpc ## Regenerate the Go code of the .proto files (protoc from protobuf-compiler).
	PATH=$(PROTOC_PLUGINS):$$PATH protoc -I $(PROTO_DIR) --go_out=paths=source_relative:$(PROTO_DIR) \
		--go-grpc_out=paths=source_relative:$(PROTO_DIR) $(PROTO_DIR)/*.proto

.PHONY: proto-check
# Regenerates into a scratch directory and compares with the committed code,
# ignoring only the protoc version line the generators write.
proto-check: $(PROTOC_PLUGINS)/protoc-gen-go-grpc ## Fail when the committed generated code differs from `make proto`.
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
		PATH=$(PROTOC_PLUGINS):$$PATH protoc -I $(PROTO_DIR) --go_out=paths=source_relative:$$tmp \
			--go-grpc_out=paths=source_relative:$$tmp $(PROTO_DIR)/*.proto && \
		for f in $$tmp/*.go; do \
			diff -u -I '^// \s*protoc \s*v' $(PROTO_DIR)/$$(basename $$f) $$f || \
				{ echo "$(PROTO_DIR): generated code is stale, run make proto"; exit 1; }; \
		done

$(PROTOC_PLUGINS)/protoc-gen-go-grpc:
	@echo "building protoc-gen-go $(PROTOC_GEN_GO_VERSION) and protoc-gen-go-grpc $(PROTOC_GEN_GO_GRPC_VERSION) from the Go module proxy"
	@mkdir -p $(@D)
	GOBIN=$(@D) GOFLAGS= GOWORK=off $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(@D) GOFLAGS= GOWORK=off $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

.PHONY: actionlint
# The workflows cannot run here; actionlint (built from the Go module proxy,
# pinned, cached per version) checks their syntax, expressions and types.
actionlint: $(ACTIONLINT) ## Lint .github/workflows with the pinned actionlint.
	$(ACTIONLINT) -color=false

$(ACTIONLINT):
	@echo "building actionlint $(ACTIONLINT_VERSION) from the Go module proxy"
	@mkdir -p $(@D)
	GOBIN=$(@D) GOFLAGS= GOWORK=off $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)

.PHONY: fuzz
# A run that ends with a bare "context deadline exceeded" and writes no failing
# input is Go 1.26's fuzz-coordinator race at the -fuzztime boundary
# (golang/go#75804, fixed in Go 1.27): reported, not counted as a failure.
# Any failing input ("Failing input written to testdata/fuzz/...") fails.
fuzz: ## Run every fuzz target for FUZZTIME each.
	@set -e; failed=0; for pkg in $$($(GO) list ./...); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$t"; \
			out=$$($(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg 2>&1) && rc=0 || rc=$$?; \
			echo "$$out" | tail -n 3; \
			if [ $$rc -ne 0 ]; then \
				if ! echo "$$out" | grep -q 'Failing input written' && \
					echo "$$out" | grep -q 'context deadline exceeded'; then \
					echo "   (fuzztime-boundary race of Go 1.26, golang/go#75804: no failing input; not a failure)"; \
				else echo "$$out"; failed=1; fi; \
			fi; \
		done; \
	done; exit $$failed

.PHONY: bench
# Every benchmark once, then one table of every figure with its same-run
# baseline, ratio, goal, and the run's steal time and load average
# (bench/cmd/benchtable), written into docs/performance.md between its
# benchtable markers (the text around it is kept; review the diff).
# The output is kept in BENCH_OUT; the table is printed even when a
# benchmark failed (its rows say not measured), and make then fails. The many-agents run (bench/scale) is
# sized by WIREKUBE_SCALE_AGENTS / WIREKUBE_SCALE_BURST (default 3,000 /
# 300; the full run is 18,000 / 1,000 with -scale.on-review-throttled, see docs/bridge.md#benchmark).
BENCH_OUT ?= $(BIN)/bench.out
bench: nginx ## Fixed-workload benchmarks with ratios against a same-run baseline, then one table.
	@mkdir -p $(BIN)
	@{ head -n 1 /proc/stat; cat /proc/loadavg; } > $(BENCH_OUT).start
	@set -o pipefail; rc=0; PATH="$$PATH:/usr/sbin" $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 90m ./... 2>&1 | \
		tee $(BENCH_OUT) || rc=$$?; \
		$(GO) run ./bench/cmd/benchtable -start $(BENCH_OUT).start -doc docs/performance.md < $(BENCH_OUT) || rc=1; exit $$rc

.PHONY: nginx
nginx: ## Install nginx from Debian when missing (the e2e suite and the demo run it).
	@.ci/apt-install nginx

.PHONY: e2e-packages
# What the e2e suite runs besides nginx: Caddy (front matrix), Node and npm
# (the ws client), Python websockets (the second independent client),
# tinyproxy (the forward proxy of the probe and idle tests). The
# distribution's services are not started (.ci/apt-install).
e2e-packages: nginx ## Install caddy, nodejs, npm, python3-websockets, tinyproxy from Debian when missing.
	@.ci/apt-install nginx caddy nodejs npm python3-websockets tinyproxy

.PHONY: e2e
e2e: build e2e-packages ## The end-to-end suite (real kube-apiserver, nginx, Caddy, Traefik, ws clients, binaries).
	PATH="$$PATH:/usr/sbin" WIREKUBE_E2E_BIN_DIR=$(BIN) $(GO) test -tags e2e -count=1 -timeout 40m -v ./e2e/... ./demo/...

.PHONY: demo
demo: build nginx ## The whole stack on this machine: traffic, attacks, a report (exit 0 only if all behaved).
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./demo/cmd/wirekube-demo
	PATH="$$PATH:/usr/sbin" $(BIN)/wirekube-demo --bin-dir=$(BIN)

.PHONY: up
up: build nginx ## The same stack as demo, kept running until Ctrl-C.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./demo/cmd/wirekube-demo
	PATH="$$PATH:/usr/sbin" $(BIN)/wirekube-demo --bin-dir=$(BIN) --up

# One image name everywhere (manifests, compose, the Helm chart, the release
# workflow); see internal/version.Image.
IMAGE ?= ghcr.io/wirekube/relay-ws:$(VERSION)
.PHONY: image
image: ## Build the container image (needs a Docker engine; not run in CI).
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

.PHONY: chart-readme
chart-readme: ## Regenerate the chart's README.md (from Chart.yaml, values.yaml) and Artifact Hub changes (from CHANGELOG.md); tests check both.
	go test ./manifests -run '^TestChartArtifactHub$$' -count=1 -update-artifacthub-changes
	go test ./manifests -run '^TestChartReadme$$' -count=1 -update-chart-readme

.PHONY: manifests-sync
manifests-sync: ## Copy envoy/ configs into manifests/base and the chart's files/ (kustomize and helm cannot read outside their roots).
	cp envoy/envoy.yaml envoy/envoy-plaintext.yaml manifests/base/
	cp envoy/sds/tls.yaml manifests/base/sds-tls.yaml
	cp envoy/envoy.yaml envoy/envoy-plaintext.yaml charts/wirekube-relay-ws/files/
	cp envoy/sds/tls.yaml charts/wirekube-relay-ws/files/sds-tls.yaml

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
