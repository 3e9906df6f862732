# Copyright The streamstall Authors
# SPDX-License-Identifier: Apache-2.0
# streamstall: the two commands a new machine needs are `make run` (the demo)
# and `make test` (every test, including the end-to-end ones against the real
# collector and a real Jaeger). Everything else is built from the Go module
# proxy by the targets below.

GO        ?= go
TOOLS     := $(GO) tool -modfile=$(CURDIR)/internal/tools/go.mod
BUILD     := _build
OTELCOL   := $(BUILD)/otelcol-streamstall
JAEGER_BIN := $(BUILD)/jaeger
MDATAGEN  := $(BUILD)/mdatagen
FAKELLM   := $(BUILD)/fakellm
DEMO      := $(BUILD)/demo
# FUZZTIME: each fuzz target's budget, as an execution count (Nx) so that a loaded
# machine cannot fail a run on the fuzzer's own clock; FUZZTIME=30s still works.
FUZZTIME  ?= 50000x
# Each new interesting input is minimized for at most this many executions
# (Go's default is 60 s each: a target of large inputs spent minutes on it).
FUZZMINIMIZE ?= 500x
BENCHTIME ?= 1s
COUNT     ?= 5

# The modules the targets below run in: the root one (the collector components) and the ones
# nested in it (the hedging client and the packages it shares with the collector, which are
# modules of their own so that a program using the client gets none of the collector's module
# graph: hedge/README.md). The tools modules under internal/tools are not among them.
MODULES := $(patsubst ./%,%,$(patsubst %/go.mod,%,$(shell find . -name go.mod -not -path './_build/*' -not -path './internal/tools/*' | sort)))

GO_SOURCES := $(shell find . -name '*.go' -not -path './_build/*' -not -path './internal/tools/*') \
	$(wildcard $(foreach m,$(MODULES),$(m)/go.mod $(m)/go.sum))

.PHONY: all otelcol jaeger fakellm demo run sim test unit race alloc fuzz e2e lint bench clean tidy generate prometheus rules release rehearse node-deps

# Every component directory: the directories holding a metadata.yaml.
COMPONENTS = $(patsubst ./%/metadata.yaml,%,$(shell find . -name metadata.yaml -not -path './_build/*' -not -path '*/testdata/*'))

all: otelcol

## otelcol: build _build/otelcol-streamstall with ocb from builder-config.yaml
otelcol: $(OTELCOL)
$(OTELCOL): builder-config.yaml $(GO_SOURCES)
	$(TOOLS) builder --config builder-config.yaml
	@touch $@

## jaeger: build Jaeger v2 from its own tools module (it pins an older collector)
jaeger: $(JAEGER_BIN)
$(JAEGER_BIN): internal/tools/jaeger/go.mod
	cd internal/tools/jaeger && $(GO) build -trimpath -o ../../../$(JAEGER_BIN) github.com/jaegertracing/jaeger/cmd/jaeger

## generate: run mdatagen on every metadata.yaml: internal/metadata, the generated tests,
##           documentation.md and the README status block (the last step fills in the link of
##           the streamstall distribution, which mdatagen leaves empty)
generate: $(MDATAGEN)
	@set -e; for d in $(COMPONENTS); do \
	  grep -q '^github_project: streamstall/streamstall$$' $$d/metadata.yaml || \
	    { echo "$$d/metadata.yaml: add 'github_project: streamstall/streamstall' (README links)" >&2; exit 1; }; \
	  echo "mdatagen $$d"; \
	  (cd $$d && $(CURDIR)/$(MDATAGEN) metadata.yaml); \
	  if [ -f $$d/README.md ]; then \
	    sed -i "s|^\[streamstall\]: *$$|[streamstall]: $$(echo $$d | sed 's|[^/][^/]*|..|g')/builder-config.yaml|" $$d/README.md; \
	  fi; \
	done

## mdatagen: built once from its own tools module (internal/tools/mdatagen/README.md)
$(MDATAGEN): internal/tools/mdatagen/go.mod internal/tools/mdatagen/go.sum
	cd internal/tools/mdatagen && $(GO) build -trimpath -o ../../../$(MDATAGEN) go.opentelemetry.io/collector/cmd/mdatagen

fakellm: $(FAKELLM)
$(FAKELLM): $(GO_SOURCES)
	$(GO) build -o $(FAKELLM) ./cmd/fakellm

demo: $(DEMO)
$(DEMO): $(GO_SOURCES)
	$(GO) build -o $(DEMO) ./cmd/demo

## run: the demo: fakellm -> sse_capture proxy -> stall -> stall_metrics, summary printed
##      (make run JAEGER=1 also starts Jaeger and prints the UI link)
run: otelcol fakellm demo $(if $(JAEGER),jaeger)
	$(DEMO) -otelcol $(OTELCOL) -fakellm $(FAKELLM) $(if $(JAEGER),-jaeger $(JAEGER_BIN))

## sim: the hedging simulator's tables (hedge/README.md): seven policies and the proxy guard on the W1 and W2 workloads,
##      and a fleet of short-lived processes with and without fleet advice (hedge_advisor)
sim:
	$(GO) run ./cmd/hedgesim -calls 20000 -seed 1

## test: unit tests with the race detector, the allocation tests without it, short fuzzing of
##       every parser, the Prometheus rules' tests, the end-to-end tests and the release rehearsal
test: race alloc fuzz rules e2e rehearse

unit:
	@set -e; for m in $(MODULES); do echo "go test $$m"; (cd $$m && $(GO) test ./...); done

race: node-deps
	@set -e; for m in $(MODULES); do echo "go test -race $$m"; (cd $$m && $(GO) test -race ./...); done

## node-deps: the npm packages of the Vercel AI SDK test of the guard (receiver/ssecapture/testdata/vercel),
##            from the npm registry, pinned by its package-lock.json; without npm that test skips
node-deps:
	@if command -v npm >/dev/null; then npm ci --prefix receiver/ssecapture/testdata/vercel --no-audit --no-fund --loglevel=error; \
	else echo "no npm: the guard's Vercel AI SDK test will skip"; fi

## fuzz: run every fuzz target for FUZZTIME executions, minimizing each new input for
##       at most FUZZMINIMIZE. Go 1.26's coordinator can
##       fail a time-boxed run on its own deadline under load (fixed in Go 1.27), so
##       the budget is a count; a real finding still fails the run and writes its
##       reproducer to testdata/fuzz.
fuzz:
	@set -e; for m in $(MODULES); do (cd $$m && for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg; \
	  done; \
	done); done

## alloc: the allocation guarantees, without the race detector (it makes
##        sync.Pool drop items at random, so those tests skip under -race)
alloc:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) test -count=1 -run 'Alloc' ./...); done

## prometheus: Debian's prometheus package (prometheus, promtool), installed when either is missing
##             (as root, or with sudo); the package's own service is stopped and disabled
prometheus:
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
	  sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "installing Debian's prometheus package"; \
	  $$sudo apt-get update && $$sudo apt-get install -y --no-install-recommends prometheus || exit 1; \
	  if [ -d /run/systemd/system ]; then $$sudo systemctl disable --now prometheus || true; \
	  elif [ -x /etc/init.d/prometheus ]; then $$sudo invoke-rc.d prometheus stop || true; fi; \
	fi

## rules: check and unit-test the Prometheus rules of docs/prometheus with promtool
rules: prometheus
	promtool check rules docs/prometheus/streamstall-rules.yaml
	cd docs/prometheus && promtool test rules streamstall-rules.test.yaml

## e2e: the real collector (ocb), a real Jaeger and a real Prometheus on loopback, and the demo
##      against its golden summary (cmd/demo/testdata/summary.golden, which docs/quickstart.md quotes)
e2e: otelcol jaeger fakellm prometheus
	STREAMSTALL_OTELCOL=$(CURDIR)/$(OTELCOL) STREAMSTALL_JAEGER=$(CURDIR)/$(JAEGER_BIN) STREAMSTALL_FAKELLM=$(CURDIR)/$(FAKELLM) \
	STREAMSTALL_PROMETHEUS=$$(command -v prometheus) \
	  $(GO) test -tags e2e -count=1 -timeout 20m -v ./e2e/... ./cmd/demo/

## release: the release commit and the tags of VERSION in this clone (make release VERSION=v0.2.0):
##          every requirement between our modules, versions.yaml and both ocb manifests name VERSION,
##          and each module of versions.yaml is tagged. It pushes nothing (docs/releasing.md).
release:
	@[ -n "$(VERSION)" ] || { echo "usage: make release VERSION=vX.Y.Z (docs/releasing.md)" >&2; exit 2; }
	$(GO) build -C internal/tools -o $(CURDIR)/$(BUILD)/release ./release
	$(BUILD)/release prepare $(VERSION)

## rehearse: make release VERSION=v0.99.0 in a scratch clone, a file-system module proxy from its tags,
##           then offline and without replaces: ocb builds the README's manifest and the collector
##           validates examples/, and a program importing only hedge builds, runs and has no collector
##           module in its graph. The module cache that otelcol fills is its only other source.
rehearse: otelcol
	cd internal/tools && $(GO) test -count=1 ./release/ ./modproxy/
	internal/tools/release/rehearse.sh

## lint: golangci-lint (.golangci.yml: contrib's linters, goheader for the license header) in every
##       module and on the e2e-tagged tests, and an SPDX header in every source file that is not generated
lint:
	@set -e; for m in $(MODULES); do echo "golangci-lint $$m"; (cd $$m && $(TOOLS) golangci-lint run ./...); done
	$(TOOLS) golangci-lint run --build-tags e2e ./e2e/... ./cmd/demo/...
	@missing=$$(git ls-files '*.go' '*.sh' Makefile .ci/run | xargs grep -L 'SPDX-License-Identifier: Apache-2.0' | \
	  xargs -r grep -L '^// Code generated .* DO NOT EDIT\.$$' || true); \
	  if [ -n "$$missing" ]; then echo "no SPDX license header (make lint):" $$missing >&2; exit 1; fi

## bench: every benchmark, COUNT runs each; ratios against their baselines are in the component READMEs
bench:
	@mkdir -p $(BUILD); : >$(BUILD)/bench.txt
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) ./...) | tee -a $(BUILD)/bench.txt; done

tidy:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done
	cd internal/tools && $(GO) mod tidy
	cd internal/tools/mdatagen && $(GO) mod tidy

clean:
	rm -rf $(BUILD)
