# The two commands of the README: `make run` and `make test`. Both install what is missing
# (scripts/ensure-deps.sh) or say exactly what to install.
GO      ?= go
BIN     := bin/clouddb
# The version `clouddb version` reports: the checkout's tag or commit (empty outside git,
# and then Go's build information decides).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
# Two cores here: keep test parallelism modest.
TESTFLAGS ?= -race -p 2 -timeout 20m

# golangci-lint, pinned: scripts/ensure-deps.sh installs this version when it is missing
# or another one is on the PATH (config: .golangci.yml).
GOLANGCI_LINT_VERSION := v2.15.0
GOLANGCI_LINT ?= $(shell $(GO) env GOPATH)/bin/golangci-lint

.PHONY: all build run test test-k8s k8s-build-bg vet lint deps test-deps bench soak fuzz clean

all: build

deps:
	@scripts/ensure-deps.sh run

test-deps:
	@GOLANGCI_LINT_VERSION=$(GOLANGCI_LINT_VERSION) scripts/ensure-deps.sh test

build:
	@test -x $(BIN) || echo "Building clouddb. The first build downloads its Go modules and compiles them: a few minutes; later builds take seconds." >&2
	$(GO) build -ldflags "-X clouddb.version=$(VERSION)" -o $(BIN) ./cmd/clouddb

run: deps build
	./$(BIN) serve

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

lint: test-deps
	$(GOLANGCI_LINT) run ./...

test: k8s-build-bg test-deps vet lint
	$(GO) test $(TESTFLAGS) ./...
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory test-k8s; \
	else echo "skipping the kubernetes driver's cluster tests: make test-k8s needs root" >&2; fi

# As root (then test runs test-k8s), Kubernetes' first build starts in the background at
# the lowest priority, to use what CPU vet, lint and the other packages' tests leave;
# test-k8s waits for it, and shows its log if it failed. Nothing when already built.
k8s-build-bg:
	@if [ "$$(id -u)" = 0 ]; then scripts/k8s-test-cluster.sh build-bg; fi

# The kubernetes driver's tests on a real single-host cluster, brought up for them and
# always torn down (scripts/k8s-test-cluster.sh run; root; one run at a time on a
# machine). The first run builds Kubernetes from the Go module proxy (the build step,
# before the cluster's lock is taken); later ones start it in about ten seconds.
# -parallel 6: the package's tests and TestConformance's cases (their own databases, most in
# namespaces of their own) mostly wait for pods, not CPU.
test-k8s:
	@scripts/k8s-test-cluster.sh build
	@scripts/k8s-test-cluster.sh run -- $(GO) test $(TESTFLAGS) -parallel 6 -count=1 -v ./driver/kubernetes/

# A bounded soak (a few minutes): several accounts, mixed requests, random restarts.
soak: deps
	$(GO) test -tags soak -run TestSoak -timeout 30m -v ./cmd/clouddb/

# Runs each fuzz target of every package for FUZZTIME (their seed corpora run in
# `make test`).
FUZZTIME ?= 60s
FUZZPKGS ?= ./cloudapi/ ./driver/local/ ./browser/
fuzz:
	@for p in $(FUZZPKGS); do \
		for t in $$($(GO) test -list 'Fuzz.*' $$p | grep ^Fuzz); do \
			echo "== $$p $$t"; $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$p || exit 1; \
		done; \
	done

# As root with the test cluster's Kubernetes built (scripts/k8s-test-cluster.sh build, which
# make test-k8s runs), the k8s section runs on that cluster, brought up for the section alone
# after the others (-k8s-cluster: `run` under the cluster's lock, always torn down);
# otherwise it is skipped, and the report says why. The check finds the script's cache
# without building anything.
K8S_CLUSTER_VERSION = $${CLOUDDB_K8S_VERSION:-$$(sed -n 's/^K8S_VERSION=.*:-\([0-9.]*\)}$$/\1/p' scripts/k8s-test-cluster.sh)}
K8S_CLUSTER_CACHE = $${CLOUDDB_K8S_CACHE:-$${XDG_CACHE_HOME:-$$HOME/.cache}/clouddb-k8s}
bench: deps
	@v=$(K8S_CLUSTER_VERSION); k8s=; \
	if [ "$$(id -u)" = 0 ] && [ -n "$$v" ] && [ -x "$(K8S_CLUSTER_CACHE)/v$$v/bin/kubelet" ]; then \
		k8s="-k8s-cluster scripts/k8s-test-cluster.sh"; \
	else echo "bench: the k8s section skips: it needs root and Kubernetes built (scripts/k8s-test-cluster.sh build)" >&2; fi; \
	echo "$(GO) run ./bench -out BENCHMARKS.md $$k8s"; \
	$(GO) run ./bench -out BENCHMARKS.md $$k8s

clean:
	rm -rf bin
