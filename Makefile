# sessionlog: make test is exactly what CI (.ci/run) runs.
GO ?= go
# Libraries and services: race detector on.
RACE_PKGS = $(shell $(GO) list ./... | grep -v /e2e)
# Process-level end-to-end tests (real binaries, SIGKILL, 3-node clusters):
# plain go test; their components are race-tested in their own packages.
E2E_PKGS = $(shell $(GO) list ./e2e/...)
# A count, not a duration (go.dev/issue/75804: a duration can end in a bare
# "context deadline exceeded" on a loaded machine).
FUZZTIME ?= 300000x

.PHONY: test node-deps test-race test-sealed test-e2e test-e2e-race race lint bench fuzz build

# `make -k test` runs every part even when one fails.
test: node-deps test-race test-sealed test-e2e test-e2e-race

# The conformance tests run the protocols' own SDKs in Node (clients/*):
# their packages installed, and built (again: a dist/ older than its
# sources would test old code) where a package has a build. nats-log
# first: the SDK clients build on it.
node-deps:
	@for d in clients/nats-log/ clients/*/; do \
		if [ -f "$$d/package-lock.json" ] && [ ! -d "$$d/node_modules" ]; then \
			(cd "$$d" && npm ci --no-audit --no-fund) || exit 1; \
		fi; \
		if grep -q '"build"' "$$d/package.json" 2>/dev/null; then \
			(cd "$$d" && npm run build) || exit 1; \
		fi; \
	done

test-race:
	$(GO) test -race -count=1 -timeout 30m $(RACE_PKGS)

# The packages' own tests with every store they open sealing bodies (the
# tag sealforced: logstore.SealForced, docs/adr/011-sealed-bodies.md,
# "Default"); a test that needs plain bodies says so (logstore's Plain).
SEALED_PKGS = ./internal/logstore ./cmd/sessionlog
test-sealed: node-deps
	$(GO) test -tags sealforced -count=1 -timeout 20m $(SEALED_PKGS)

# One package at a time: each starts clusters and kills processes, and the
# fault suite's leases must not be starved by the others on 2 cores.
test-e2e:
	$(GO) test -count=1 -p 1 -timeout 30m $(E2E_PKGS)

# The whole fault suite under the race detector (the 3-node cluster's
# faults and `up`'s): its nodes and services, `up` and verify are then
# race-built, and every child's race reports fail the test (but the one
# race of nats-server's JetStream restart it names, e2e/README.md).
test-e2e-race:
	$(GO) test -race -count=1 -p 1 -timeout 45m ./e2e/faults

race:
	$(GO) test -race -count=1 -timeout 60m ./...

lint:
	$(GO) vet ./...
	$(GO) vet -tags sealforced $(SEALED_PKGS) ./internal/natstest
	@out=$$(gofmt -l $$(git ls-files "*.go" 2>/dev/null || find . -name "*.go")); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

bench:
	$(GO) test -run=^$$ -bench=. -benchmem $(RACE_PKGS)

fuzz:
	$(GO) test -run=^$$ -fuzz=FuzzDecodeValidate -fuzztime=$(FUZZTIME) ./pkg/schema
	$(GO) test -run=^$$ -fuzz=FuzzCheckJSON -fuzztime=$(FUZZTIME) ./pkg/schema
	$(GO) test -run=^$$ -fuzz=^FuzzDecodeLine$$ -fuzztime=$(FUZZTIME) ./pkg/agentlog/claudecode
	$(GO) test -run=^$$ -fuzz=^FuzzFastBlocks$$ -fuzztime=$(FUZZTIME) ./pkg/agentlog/claudecode
	$(GO) test -run=^$$ -fuzz=^FuzzAppendReply$$ -fuzztime=$(FUZZTIME) ./pkg/client
	$(GO) test -run=^$$ -fuzz=^FuzzPlainSpan$$ -fuzztime=$(FUZZTIME) ./pkg/schema
	$(GO) test -run=^$$ -fuzz=^FuzzAppendJSONString$$ -fuzztime=$(FUZZTIME) ./pkg/schema
	$(GO) test -run=^$$ -fuzz=^FuzzAppendTimeUTC$$ -fuzztime=$(FUZZTIME) ./pkg/schema

build:
	$(GO) build -o bin/sessionlog ./cmd/sessionlog
