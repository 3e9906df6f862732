# streamstall: the two commands a new machine needs are `make run` (the demo)
# and `make test` (every test, including the end-to-end ones against the real
# collector and a real Jaeger). Everything else is built from the Go module
# proxy by the targets below.

GO        ?= go
TOOLS     := $(GO) tool -modfile=internal/tools/go.mod
BUILD     := _build
OTELCOL   := $(BUILD)/otelcol-streamstall
JAEGER_BIN := $(BUILD)/jaeger
FAKELLM   := $(BUILD)/fakellm
DEMO      := $(BUILD)/demo
FUZZTIME  ?= 15s
BENCHTIME ?= 1s
COUNT     ?= 5

GO_SOURCES := $(shell find . -name '*.go' -not -path './_build/*' -not -path './internal/tools/*') go.mod go.sum

.PHONY: all otelcol jaeger fakellm demo run sim test unit race fuzz e2e lint bench clean tidy

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

## sim: the hedging simulator's tables (hedge/README.md): seven policies on the W1 and W2 workloads,
##      and a fleet of short-lived processes with and without fleet advice (hedge_advisor)
sim:
	$(GO) run ./cmd/hedgesim -calls 20000 -seed 1

## test: unit tests with the race detector, short fuzzing of every parser, and the end-to-end tests
test: race fuzz e2e

unit:
	$(GO) test ./...

race:
	$(GO) test -race ./...

## fuzz: run every fuzz target for FUZZTIME
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/^func //'); do \
	    echo "fuzz $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

## e2e: the real collector (ocb) and a real Jaeger on loopback
e2e: otelcol jaeger fakellm
	STREAMSTALL_OTELCOL=$(CURDIR)/$(OTELCOL) STREAMSTALL_JAEGER=$(CURDIR)/$(JAEGER_BIN) STREAMSTALL_FAKELLM=$(CURDIR)/$(FAKELLM) \
	  $(GO) test -tags e2e -count=1 -timeout 20m -v ./e2e/...

lint:
	$(TOOLS) golangci-lint run ./...
	$(TOOLS) golangci-lint run --build-tags e2e ./e2e/...

## bench: every benchmark, COUNT runs each; ratios against their baselines are in the component READMEs
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(COUNT) ./... | tee $(BUILD)/bench.txt

tidy:
	$(GO) mod tidy
	cd internal/tools && $(GO) mod tidy

clean:
	rm -rf $(BUILD)
