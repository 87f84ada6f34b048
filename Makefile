# replicad — build, generate, lint, test.
#
# Tools (buf, protoc-gen-go, protoc-gen-go-grpc, grpcurl) are pinned in tools/go.mod and
# built once through the Go toolchain into the git-ignored bin/. Jaeger, Prometheus and NATS
# (for bench-peers) are pinned in modules of their own, tools/{jaeger,prometheus,nats}/go.mod,
# so their large dependency trees stay out of both.

SHELL := /bin/bash
BIN   := $(CURDIR)/bin
GEN_TOOLS := $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
GO_TEST_FLAGS ?=

.PHONY: all build tools gen check-gen breaking lint test crash-test sim chaos chaos-regress fuzz bench perf-tracing bench-peers demo jaeger \
	jaeger-build prometheus nats check-monitoring image image-context image-test deploy-test clean

all: build

# -buildvcs=auto: Go stamps the commit into the build info in a plain clone (this machine's
# go env may say -buildvcs=false); scripts/version-ldflags.sh gives the same facts from git
# where Go stamps nothing (a git worktree). `replicad --version`, `ctlclient version` print them.
VERSION_LDFLAGS = $(shell ./scripts/version-ldflags.sh)
GO_BUILD = go build -buildvcs=auto -ldflags "$(VERSION_LDFLAGS)"

build:
	$(GO_BUILD) -o $(BIN)/replicad ./cmd/replicad
	$(GO_BUILD) -o $(BIN)/ctlclient ./cmd/ctlclient

# Tools are built from the versions pinned in tools/go.mod; make rebuilds them
# only when the pins change.
$(GEN_TOOLS) &: tools/go.mod tools/go.sum
	cd tools && GOBIN=$(BIN) go install github.com/bufbuild/buf/cmd/buf \
		google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
	@touch $(GEN_TOOLS)

$(BIN)/grpcurl: tools/go.mod tools/go.sum
	cd tools && GOBIN=$(BIN) go install github.com/fullstorydev/grpcurl/cmd/grpcurl
	@touch $@

tools: $(GEN_TOOLS) $(BIN)/grpcurl

# Jaeger v1.76.0 (the OpenTelemetry-Collector-based binary), built from source once: the
# first time ~1 GB of modules and ~20 CPU-minutes of compiling (10+ minutes on 2 cores), later
# a link from the Go build cache (under a minute); rebuilt only when the pin changes. A source build serves the query API but not the UI (its assets are not in the
# Go module): for the UI run the official image, see docs/monitoring.md.
$(BIN)/jaeger: tools/jaeger/go.mod tools/jaeger/go.sum
	cd tools/jaeger && go build -o $@ github.com/jaegertracing/jaeger/cmd/jaeger
	@touch $@

jaeger-build: $(BIN)/jaeger

# Jaeger in the foreground with in-memory storage: OTLP/gRPC on 127.0.0.1:4317, query API
# on http://127.0.0.1:16686 (tools/jaeger/config.yaml; JAEGER_OTLP_GRPC and
# JAEGER_QUERY_HTTP move them, e.g. JAEGER_QUERY_HTTP=0.0.0.0:16686). Ctrl-C stops it.
jaeger: $(BIN)/jaeger
	$(BIN)/jaeger --config tools/jaeger/config.yaml

# Prometheus and promtool, pinned in tools/prometheus/go.mod (github.com/prometheus/prometheus
# v0.316.0 is Prometheus 3.16.0), built from source like Jaeger, with the service discoveries
# other than file, HTTP and static left out (-tags remove_all_sd: the AWS, Azure, GCE, ...
# clients are most of the build, and scraping a replicad cluster needs none of them). The
# version is stamped from the pin (v0.MMmPP.x is MM/100 . MM%100 . x). Like Jaeger's source
# build it serves the HTTP API but not the web UI (the UI assets are not in the Go module).
# The first build from a cold Go cache takes many minutes (docs/development.md); later ones
# only when the pin changes.
PROMETHEUS_VERSION = $(shell awk '$$1 == "github.com/prometheus/prometheus" { split(substr($$2, 4), v, "."); \
	printf "%d.%d.%s", v[1] / 100, v[1] % 100, v[2] }' tools/prometheus/go.mod)
$(BIN)/prometheus $(BIN)/promtool &: tools/prometheus/go.mod tools/prometheus/go.sum
	cd tools/prometheus && go build -tags remove_all_sd \
		-ldflags "-X github.com/prometheus/common/version.Version=$(PROMETHEUS_VERSION)" -o $(BIN)/ \
		github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
	@touch $(BIN)/prometheus $(BIN)/promtool

prometheus: $(BIN)/prometheus $(BIN)/promtool

# NATS JetStream (nats-server v2.15.2) and the nats CLI (v0.5.0, for `nats bench`), pinned in
# tools/nats/go.mod and built from source like Jaeger and Prometheus, only when the pin changes
# (a minute or two from a cold Go cache). Only `make bench-peers` uses them.
$(BIN)/nats-server $(BIN)/nats &: tools/nats/go.mod tools/nats/go.sum
	cd tools/nats && go build -o $(BIN)/ github.com/nats-io/nats-server/v2 github.com/nats-io/natscli/nats
	@touch $(BIN)/nats-server $(BIN)/nats

nats: $(BIN)/nats-server $(BIN)/nats

# The monitoring files checked by the real promtool: the rules' syntax and their unit tests
# (deploy/monitoring/rules_test.yml); `make test` does the same and more (tests/integration).
check-monitoring: $(BIN)/promtool
	$(BIN)/promtool check rules deploy/monitoring/replicad-rules.yml
	$(BIN)/promtool test rules deploy/monitoring/rules_test.yml

# gen/ from proto/, then the generated reference pages docs/reference/{flags,errors}.md from
# the binaries' flag sets and the ErrorCode enum (scripts/gen-reference.sh).
gen: $(GEN_TOOLS)
	rm -rf gen
	PATH=$(BIN):$$PATH $(BIN)/buf generate
	./scripts/gen-reference.sh

# Fails when gen/ or docs/reference/ is not what `make gen` produces.
check-gen: gen
	@if [ -n "$$(git status --porcelain -- gen docs/reference)" ]; then \
		echo "gen/ or docs/reference/ is stale: run 'make gen' and commit the result"; \
		git status --porcelain -- gen docs/reference; exit 1; fi

# The gRPC contract against main: buf breaking with the FILE rules of buf.yaml, against where
# this branch left main (on main: the commit before the last); scripts/buf-breaking.sh says why.
breaking: $(GEN_TOOLS)
	BUF=$(BIN)/buf ./scripts/buf-breaking.sh

lint: $(GEN_TOOLS)
	$(BIN)/buf lint
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	go vet ./...

# Unit, fuzz-seed and integration tests (integration tests build and start real
# replicad processes on loopback; the tracing one also a real Jaeger, the monitoring ones a
# real Prometheus and promtool, the docs test (README.md, docs/) grpcurl, which must be built: with
# REPLICAD_JAEGER_BIN, REPLICAD_PROMETHEUS_BIN and REPLICAD_GRPCURL_BIN set they fail rather than
# skip when a binary is missing).
test: $(BIN)/jaeger $(BIN)/prometheus $(BIN)/promtool $(BIN)/grpcurl
	REPLICAD_JAEGER_BIN=$(BIN)/jaeger REPLICAD_PROMETHEUS_BIN=$(BIN)/prometheus REPLICAD_PROMTOOL_BIN=$(BIN)/promtool \
		REPLICAD_GRPCURL_BIN=$(BIN)/grpcurl go test -race -count=1 -timeout 45m $(GO_TEST_FLAGS) ./...

# The power-loss simulation of the storage code (core/crashtest) at length:
# SEEDS seeds for each flush mode (every-batch, interval, os), about 1.7 power
# cuts a seed, without -race, with progress and a summary (`make test` runs
# 2,000 seeds a mode under -race).
SEEDS ?= 100000
crash-test:
	go test ./core/crashtest -run '^TestPowerLoss$$' -count=1 -timeout 0 -v -crash.seeds=$(SEEDS) -crash.progress

# The deterministic simulation of the whole cluster (tests/sim): SEEDS fresh
# random seeds (default 200; crash-test's default is not taken) besides the fixed
# ones, in parallel over every core, each run twice to check it replays; prints
# each seed, its steps and steps/s, the invariant violations, a summary, and for
# a failure the command that replays it. `make test` runs a few seeds under -race.
sim:
	go test ./tests/sim -run '^TestSim$$' -count=1 -timeout 0 -v \
		-sim.seeds=$(if $(filter command line environment,$(origin SEEDS)),$(SEEDS),200)

# The chaos test at length (tests/chaos): a controller and BROKERS brokers as real processes
# from bin/, behind a fault-injecting proxy, under acks=all producers and consumers, with ROUNDS
# seeded faults, then the checker. ETCD=1: 3 controllers on a 3-member etcd; HARSH=1: the harsh
# mix; TLS=1: every process on mutual TLS with authorization on. SEED=0 draws a seed and prints it; FROM=K skips to round K of the seed's schedule.
# EXTRA=P: P% of fault rounds are followed by an operator action or a long network cut (default
# 25; 0: none); EVERY=1: every one is, each kind in turn (make test's embedded run). As root, a
# log dir of each broker is a small tmpfs (disk-full faults). The summary names the folder holding the history and every process log.
# The producers are idempotent (issue 21); RESTARTS=P: during P% of fault rounds a producer restarts
# with its producer ID (default 50); DELETES=P: during P% the records of the fault's partition are
# deleted up to its HW (default 30); RETENTION=P: during P% the retention check runs now on the fault's partition
# with retention.ms at 1 (default 20); NOIDEM=1: plain produce retried as is (the checker then finds
# duplicates). `make chaos-regress` shows it on a fixed fault.
ROUNDS ?= 100
SEED ?= 0
FROM ?= 0
BROKERS ?= 3
EXTRA ?= 25
RESTARTS ?= 50
DELETES ?= 30
RETENTION ?= 20
ETCD ?=
HARSH ?=
TLS ?=
chaos: build
	go test ./tests/chaos -run '^TestChaos$$' -count=1 -timeout 0 -v -chaos.bin=$(BIN) \
		-chaos.rounds=$(ROUNDS) -chaos.seed=$(SEED) -chaos.from=$(FROM) -chaos.brokers=$(BROKERS) -chaos.extra=$(EXTRA) \
		-chaos.restarts=$(RESTARTS) -chaos.deletes=$(DELETES) -chaos.retention=$(RETENTION) $(if $(NOIDEM),-chaos.noidem) \
		$(if $(ETCD),-chaos.etcd) $(if $(HARSH),-chaos.harsh) $(if $(TLS),-chaos.tls) $(if $(EVERY),-chaos.every)

chaos-regress: build
	go test ./tests/chaos -run '^TestChaosFindsDuplicatesWithoutIdempotence$$' -count=1 -timeout 10m -v \
		-chaos.bin=$(BIN) -chaos.regress

# Coverage-guided fuzzing of log recovery (runs until FUZZTIME).
FUZZTIME ?= 60s
fuzz:
	go test ./core/log -run '^$$' -fuzz FuzzRecovery -fuzztime $(FUZZTIME)

bench:
	go test -run '^$$' -bench . -benchmem ./core/...

# What tracing costs an acks=all producer: 3 brokers, with no exporter, exporting to a real
# Jaeger, and with --trace-data-plane, alternating (scripts/perf-tracing.sh; ROUNDS=5 etc.).
perf-tracing: build $(BIN)/jaeger
	./scripts/perf-tracing.sh

# replicad side by side with NATS JetStream, fresh 3-node clusters of each on loopback, alternating
# run by run, ROUNDS times (scripts/bench-peers.sh, whose header says what each row measures and
# why the two sides do the same work): throughput without and with an fsync per write (16
# producers, 100 records in flight each), replicad with mutual TLS, and one synchronous producer
# sending one record at a time at equal durability both ways (msg/s, p50, p99). Prints every run,
# the medians and the ratios replicad / JetStream. Data goes under TMPDIR: keep it off tmpfs,
# where fsync is free. RECORDS=200000 SYNC_RECORDS=5000 ROUNDS=3 ROWS="a b c d-os d-fsync".
bench-peers: build $(BIN)/nats-server $(BIN)/nats
	./scripts/bench-peers.sh

# The controller and brokers 1-3 on 127.0.0.1:9090-9093 (data and logs in .demo/), a kill -9
# of the leader under an acks=all producer, the check that every acknowledged record is still
# there, the broker's return to the ISR; then the cluster runs until Ctrl-C.
# DEMO_NONINTERACTIVE=1 stops it after the steps (exit 0 on success). OTEL_EXPORTER_OTLP_ENDPOINT
# is passed on to every process.
demo: build $(BIN)/grpcurl
	./scripts/demo.sh

# The container image (Containerfile): static binaries (CGO off) built here into IMAGE_DIR, the
# build context, then copied FROM scratch, so the build needs no registry. grpc-health-probe,
# the image's health check, comes from the Go module proxy at a pinned version. CONTAINER_TOOL
# is podman (a docker-format image, which keeps HEALTHCHECK) or else docker.
IMAGE ?= replicad:dev
IMAGE_DIR := build/image
GRPC_HEALTH_PROBE_VERSION := v0.4.62
# -s -w: no symbol table or DWARF (a third of the size); stack traces still name every frame.
IMAGE_GO_BUILD = go build -buildvcs=auto -trimpath -ldflags "$(VERSION_LDFLAGS) -s -w"
CONTAINER_TOOL ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)

image-context:
	rm -rf $(IMAGE_DIR) && mkdir -p $(IMAGE_DIR)/bin $(IMAGE_DIR)/etc $(IMAGE_DIR)/data
	CGO_ENABLED=0 $(IMAGE_GO_BUILD) -o $(IMAGE_DIR)/bin/replicad ./cmd/replicad
	CGO_ENABLED=0 $(IMAGE_GO_BUILD) -o $(IMAGE_DIR)/bin/ctlclient ./cmd/ctlclient
	cd $(IMAGE_DIR) && CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOBIN=$(CURDIR)/$(IMAGE_DIR)/bin \
		go install -trimpath -ldflags "-s -w" github.com/grpc-ecosystem/grpc-health-probe@$(GRPC_HEALTH_PROBE_VERSION)
	cp deploy/image/passwd deploy/image/group $(IMAGE_DIR)/etc/

image: image-context
	@if [ -z "$(CONTAINER_TOOL)" ]; then echo "make image: needs podman or docker (apt-get install -y podman)"; exit 1; fi
	$(CONTAINER_TOOL) build $(if $(findstring podman,$(CONTAINER_TOOL)),--format docker) -f Containerfile -t $(IMAGE) \
		--build-arg VERSION="$$(./$(IMAGE_DIR)/bin/replicad version -o json | sed -n 's/.*"version": "\(.*\)",/\1/p')" \
		--build-arg REVISION="$$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
		--build-arg CREATED="$$(date -u +%Y-%m-%dT%H:%M:%SZ)" $(IMAGE_DIR)

# Builds the image with podman (installed with apt-get when missing and root), unpacks it with
# podman save and checks it: the entrypoint answers --version from the rootfs, the binaries are
# static, the user, volume and health check are set, and the rootfs's grpc-health-probe sees the
# rootfs's broker SERVING (this VM cannot run containers). Kept out of `make test` (a minute+).
image-test:
	@command -v podman >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y podman >/dev/null; } || true
	REPLICAD_IMAGE_TEST=1 go test ./deploy -run '^TestImage$$' -count=1 -v -timeout 20m

# The deployment files' checks (compose, systemd units, Kubernetes manifests); part of `make test`.
deploy-test:
	go test ./deploy -count=1 -v

clean:
	rm -rf bin data .demo build
