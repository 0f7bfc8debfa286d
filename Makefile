# Developer and CI entry points for redlimit.
#
#   make test                 install redis-server, redis-sentinel, wrk and promtool if possible, then run all tests with -race
#                             (every module's: the root's, then MODULES'), then make test-oldest
#   make test-scale           the fault path's bounds at scale (tens of thousands of identities, three stores)
#                             and the full runs of the long differential and fault tests
#                             (about 15 minutes; .ci/run runs it after make test)
#   make test-oldest [PKG_OLDEST=./...]  vet everything and test a fast subset with the oldest supported Go
#   make bench [BENCH=re] [COUNT=n] [PKG=./algorithms/...]
#   make lint                 gofmt, go vet, staticcheck
#   make run [ARGS="..."]     run the example server
#   make fuzz [FUZZTIME=30s] [PKG=./...]  run every fuzz target in turn (PKG's, then every module's)
#   make plots                draw docs/admitted-*.png, the algorithms under the same traffic, and
#                             docs/throughput.png from docs/bench/compare.csv when it is there
#   make loadtest [ARGS="..."] flood 3 example instances sharing one redis-server (about a minute)
#   make bench-compare [ARGS="..."]  redlimit against its peers, one markdown report (about 9 minutes),
#                                    and the figures behind it in docs/bench/compare.csv
#   make bench-http [ARGS="..."]     only the real-HTTP part of it, under wrk (about a minute)

SHELL := /bin/bash

GO       ?= go
PKG      ?= ./...
BENCH    ?= .
COUNT    ?= 5
FUZZTIME ?= 30s
ARGS     ?=
# staticcheck is run from the module cache rather than required in go.mod,
# so the library's users never inherit it as a dependency.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The oldest Go release the modules support (their go.mod's go line), at its
# latest patch. The go command downloads it from the module proxy on first
# use, and refuses to run it on a module whose go.mod asks for more.
GO_OLDEST  ?= go1.25.14
# What test-oldest runs the tests of: the packages that take seconds. The
# Redis-heavy algorithms and fault tests (about 5 minutes between them
# without -race) run under the current Go only, to keep make test within
# 10 minutes; vet still compiles every package and test under GO_OLDEST.
PKG_OLDEST ?= ./keyfunc/... ./middleware/... ./lua/... ./internal/scripts/... ./internal/breaker/...
# The modules beside the root one that make test tests, test-oldest vets
# (and tests, -short) and make lint covers: each integration that brings a
# dependency of its own, the example and the command. bench and docs/plots
# are vetted by test-oldest only.
# The modules whose tests test-oldest runs (-short), as PKG_OLDEST's.
OLDEST_MODULES ?= keyfunc/jwtkey config metrics cmd example
MODULES ?= keyfunc/jwtkey config metrics otelmetrics httpratecounter deploy example cmd grpclimit

.PHONY: test test-scale test-oldest bench lint run fuzz loadtest plots bench-compare bench-http

# The real-Redis tests need redis-server and redis-sentinel, and the alert
# rules' tests (deploy/) promtool; the script installs them where it
# can and explains where it cannot. Packages run one at a time (-p 1): the
# fault tests hold every decision to its deadline + 50 ms, which a 2-core
# machine running other packages' Redis load beside them cannot promise.
test:
	bash .ci/install-redis.sh
	$(GO) test -race -count=1 -p 1 -timeout 30m $(PKG)
	set -e; for m in $(MODULES); do \
		echo "== $$m"; (cd $$m && $(GO) test -race -count=1 -p 1 -timeout 10m ./...); \
	done
	$(MAKE) test-oldest

# The fault path's bounds per identity at scale (redisstore/scale_test.go,
# build tag scale): 40,000 and 160,000 identities through a frozen Redis,
# three stores on separate clients, 65,536 identities of one client; and
# the full runs of the differential tests of the scripts, of which make
# test takes a quarter of the steps (stepsOf; of the odd states' test,
# half), of the lease, fault and
# lost-reply matrices of which it takes a part (wholeMatrix), of every fault under
# every algorithm across instances (internal/faults), and of the leases'
# simulation at 32 instances (leaseSimSizes). With -race, as every test.
SCALE_RUN := ^TestScale|^TestDifferential|^TestBatchScriptMatchesDriver$$|^TestOneScriptMatchesDriver$$|^TestLeasesAtMostLimitPerKey$$|^TestAttackBatchFloodManyStores$$|^TestConcurrencyLeasesReleasedAfterFault$$|^TestLeasesUnderAdmission$$|^TestLeasesThroughOutage$$|^TestWrittenOutOneScriptsMatchAtBounds$$|^TestLeaseRedisCallsFlatWithTraffic$$|^TestLeasesReachLimit$$|^TestLeasesAcrossWindows$$|^TestLeasesHolderKilled$$|^TestLeasesPartitionedInstance$$|^TestLeasedLimitsAttack$$|^TestLeasedLimitsAtMostEachLimit$$|^TestOneScriptLostRepliesCountOnce$$|^TestOneAndBatchMatchDriverOnOddStates$$|^TestLeasedLimitsThroughOutage$$
test-scale:
	bash .ci/install-redis.sh
	$(GO) test -race -tags scale -count=1 -p 1 -timeout 60m -run '$(SCALE_RUN)' ./redisstore/
	$(GO) test -race -tags scale -count=1 -p 1 -timeout 20m -run '^TestChargesAcrossInstances$$' ./internal/faults/

# Builds, vets and tests with GO_OLDEST, so that nothing newer slips in
# (a language or library feature, or a dependency whose go.mod asks for
# more). Every module of MODULES is vetted too, and so are the bench and
# plots modules, which make test does not run, and the test files behind
# build tags (attack, which only adds files, with the rest; scale, which
# swaps some, apart).
test-oldest:
	GOTOOLCHAIN=$(GO_OLDEST) $(GO) vet -tags attack ./...
	GOTOOLCHAIN=$(GO_OLDEST) $(GO) vet -tags scale ./redisstore/ ./internal/faults/
	GOTOOLCHAIN=$(GO_OLDEST) $(GO) test -count=1 -short -p 1 $(PKG_OLDEST)
	set -e; for m in $(MODULES); do \
		echo "== $$m"; (cd $$m && GOTOOLCHAIN=$(GO_OLDEST) $(GO) vet ./...); \
	done
	set -e; for m in $(OLDEST_MODULES); do \
		(cd $$m && GOTOOLCHAIN=$(GO_OLDEST) $(GO) test -count=1 -short -p 1 ./...); \
	done
	cd bench && GOTOOLCHAIN=$(GO_OLDEST) $(GO) vet ./...
	cd docs/plots && GOTOOLCHAIN=$(GO_OLDEST) $(GO) vet ./...

bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) $(PKG)

# staticcheck needs the network the first time; a machine that cannot fetch
# it gets a warning instead of a failed lint, but its findings, once it runs,
# do fail the lint.
lint:
	@out="$$(gofmt -l .)"; \
	if [[ -n "$$out" ]]; then echo "gofmt -w needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKG)
	set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done
	@if $(GO) run $(STATICCHECK) -version >/dev/null 2>&1; then \
		set -e; \
		echo "$(GO) run $(STATICCHECK) $(PKG)"; \
		$(GO) run $(STATICCHECK) $(PKG); \
		for m in $(MODULES); do \
			echo "cd $$m && $(GO) run $(STATICCHECK) ./..."; \
			(cd $$m && $(GO) run $(STATICCHECK) ./...); \
		done; \
	else \
		echo "warning: could not fetch or build staticcheck; skipping it" >&2; \
	fi

run:
	cd example && $(GO) run . $(ARGS)

# Targets are listed with `go test -list`, so a new fuzz function is picked
# up without editing this file: PKG's in the root module, then every
# package's in each module of MODULES. -fuzz takes one package and one
# target at a time, hence the loop. The list prints each package's targets
# before that package's "ok" line, which names the package.
fuzz:
	@set -euo pipefail; \
	for m in . $(MODULES); do \
		pkgs="./..."; if [[ "$$m" == . ]]; then pkgs="$(PKG)"; fi; \
		targets="$$(cd "$$m" && $(GO) test -list '^Fuzz' $$pkgs | \
			awk '/^Fuzz/ { names[n++] = $$1; next } \
			     /^ok/   { for (i = 0; i < n; i++) print $$2, names[i]; n = 0 }')"; \
		if [[ -z "$$targets" ]]; then continue; fi; \
		while read -r pkg target; do \
			echo "== fuzzing $$target in $$pkg for $(FUZZTIME)"; \
			(cd "$$m" && $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"); \
		done <<< "$$targets"; \
	done

# Builds the example, starts its own redis-server and 3 instances on free
# loopback ports, runs a one-key flood and a 10,000-client spread against
# them and fails if a request fails or a client gets more than its limit;
# everything it starts is stopped at the end. Needs redis-server on PATH and
# Linux (each client has its own 127.x.y.z source address). Flags, e.g.
# ARGS="-duration 10s -workers 64": go run ./loadtest -h.
loadtest:
	$(GO) run ./loadtest -go $(GO) $(ARGS)

# The plotting program is a module of its own (docs/plots), so the plotting
# library never becomes a dependency of the library's users. It reads
# docs/bench/compare.csv (make bench-compare) for docs/throughput.png and
# says so on standard error, drawing the rest, when that file is missing.
plots:
	cd docs/plots && $(GO) run . -out ..

# The comparison with other rate limiters is a module of its own (bench), so
# the peers never become dependencies of the library's users, and the root's
# "go test ./..." (make test) never runs it. It starts its own redis-server
# on a free loopback port and stops it by PID; tables go to standard output,
# progress to standard error. The compare and denied tables' figures also
# go to docs/bench/compare.csv (format: bench/cmd/compare/csv.go), which
# make plots draws; ARGS come after -csv, so ARGS="-csv=" writes none and
# ARGS="-csv other.csv" writes elsewhere (relative to bench/). Flags: cd
# bench && go run ./cmd/compare -h.
bench-compare:
	cd bench && $(GO) run ./cmd/compare -csv ../docs/bench/compare.csv $(ARGS)

bench-http:
	cd bench && $(GO) run ./cmd/compare -sections http $(ARGS)
