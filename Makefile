# The two commands of the README: `make run` and `make test`. Both install what is missing
# (scripts/ensure-deps.sh) or say exactly what to install.
GO      ?= go
BIN     := bin/clouddb
# Two cores here: keep test parallelism modest.
TESTFLAGS ?= -race -p 2 -timeout 20m

.PHONY: all build run test vet deps test-deps bench soak fuzz clean

all: build

deps:
	@scripts/ensure-deps.sh run

test-deps:
	@scripts/ensure-deps.sh test

build:
	$(GO) build -o $(BIN) ./cmd/clouddb

run: deps build
	./$(BIN) serve

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

test: test-deps vet
	$(GO) test $(TESTFLAGS) ./...

# A bounded soak (a few minutes): several accounts, mixed requests, random restarts.
soak: deps
	$(GO) test -tags soak -run TestSoak -timeout 30m -v ./cmd/clouddb/

# Runs each fuzz target for FUZZTIME (the corpus under testdata/ runs in `make test`).
FUZZTIME ?= 60s
fuzz:
	@for t in $$($(GO) test -list 'Fuzz.*' ./cloudapi/ | grep ^Fuzz); do \
		echo "== $$t"; $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) ./cloudapi/ || exit 1; \
	done

bench: deps
	$(GO) run ./bench -out BENCHMARKS.md

clean:
	rm -rf bin
