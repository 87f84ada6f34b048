# replicad — build, generate, lint, test.
#
# Tools (buf, protoc-gen-go, protoc-gen-go-grpc, grpcurl) are pinned in tools/go.mod and
# built once through the Go toolchain into the git-ignored bin/.

SHELL := /bin/bash
BIN   := $(CURDIR)/bin
TOOLS := $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/grpcurl
GO_TEST_FLAGS ?=

.PHONY: all build tools gen check-gen lint test fuzz bench demo clean

all: build

build:
	go build -o $(BIN)/replicad ./cmd/replicad
	go build -o $(BIN)/ctlclient ./cmd/ctlclient

# One go install builds every tool the tools module lists; make reruns it only
# when the pinned versions change.
$(TOOLS) &: tools/go.mod tools/go.sum
	cd tools && GOBIN=$(BIN) go install tool
	@touch $(TOOLS)

tools: $(TOOLS)

gen: $(TOOLS)
	rm -rf gen
	PATH=$(BIN):$$PATH $(BIN)/buf generate

# Fails when gen/ is not what `make gen` produces from proto/.
check-gen: gen
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
		echo "gen/ is stale: run 'make gen' and commit the result"; git status --porcelain -- gen; exit 1; fi

lint: $(TOOLS)
	$(BIN)/buf lint
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	go vet ./...

# Unit, fuzz-seed and integration tests (integration tests build and start real
# replicad processes on loopback).
test:
	go test -race -count=1 $(GO_TEST_FLAGS) ./...

# Coverage-guided fuzzing of log recovery (runs until FUZZTIME).
FUZZTIME ?= 60s
fuzz:
	go test ./core/log -run '^$$' -fuzz FuzzRecovery -fuzztime $(FUZZTIME)

bench:
	go test -run '^$$' -bench . -benchmem ./core/...

demo: build
	./scripts/demo.sh

clean:
	rm -rf bin data .demo
