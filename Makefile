# replicad — build, generate, lint, test.
#
# Tools (buf, protoc-gen-go, protoc-gen-go-grpc, grpcurl) are pinned in tools/go.mod and
# built once through the Go toolchain into the git-ignored bin/.

SHELL := /bin/bash
BIN   := $(CURDIR)/bin
GEN_TOOLS := $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
GO_TEST_FLAGS ?=

.PHONY: all build tools gen check-gen lint test fuzz bench demo clean

all: build

build:
	go build -o $(BIN)/replicad ./cmd/replicad
	go build -o $(BIN)/ctlclient ./cmd/ctlclient

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

gen: $(GEN_TOOLS)
	rm -rf gen
	PATH=$(BIN):$$PATH $(BIN)/buf generate

# Fails when gen/ is not what `make gen` produces from proto/.
check-gen: gen
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
		echo "gen/ is stale: run 'make gen' and commit the result"; git status --porcelain -- gen; exit 1; fi

lint: $(GEN_TOOLS)
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

demo: build $(BIN)/grpcurl
	./scripts/demo.sh

clean:
	rm -rf bin data .demo
