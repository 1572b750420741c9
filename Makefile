# The two commands of the README: `make run` and `make test`. Both install what is missing
# (scripts/ensure-deps.sh) or say exactly what to install.
GO      ?= go
BIN     := bin/clouddb
# Two cores here: keep test parallelism modest.
TESTFLAGS ?= -race -p 2 -timeout 20m

.PHONY: all build run test vet deps bench clean

all: build

deps:
	@scripts/ensure-deps.sh

build:
	$(GO) build -o $(BIN) ./cmd/clouddb

run: deps build
	./$(BIN) serve

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

test: deps vet
	$(GO) test $(TESTFLAGS) ./...

bench: deps
	$(GO) run ./bench -out BENCHMARKS.md

clean:
	rm -rf bin
