# Sluice's developer commands. `make test` is what CI runs.
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# The Debian packages of the programs the Redis tests run (redis-server, redis-cli).
REDIS_PACKAGES = redis-server redis-tools
HAVE_REDIS = command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1
# The Debian package of the PostgreSQL server the pgstore tests run (initdb and
# postgres, found where internal/pgtest looks: $SLUICE_POSTGRES_BIN,
# `pg_config --bindir`, /usr/lib/postgresql/<version>/bin).
POSTGRES_PACKAGES = postgresql
HAVE_POSTGRES = { [ -n "$$SLUICE_POSTGRES_BIN" ] && [ -x "$$SLUICE_POSTGRES_BIN/initdb" ]; } || \
	[ -x "$$(pg_config --bindir 2>/dev/null)/initdb" ] || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1
# The Debian package of the headless browser the live page's test drives
# (cmd/sluice's TestLivePageInABrowser, through chromedp).
BROWSER_PACKAGES = chromium
HAVE_BROWSER = command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1

.PHONY: test deps deps-redis deps-postgres deps-browser vet staticcheck bench bench-peers lint fmt

## test: vet and staticcheck, every test with the race detector in random
## order, the allocation guards and the deploy module's tests, side by side
## (make -j, each step's output printed whole when it ends): most of the
## long tests wait on processes, sockets and timers rather than on the CPU,
## so the steps fill each other's waits; four test binaries at once (-p 4)
## for the same reason
test: deps
	@$(MAKE) --no-print-directory -j 5 --output-sync=target vet staticcheck test-race test-allocs test-deploy
	@$(HAVE_REDIS) || echo "make test: WARNING: the Redis tests were SKIPPED: redis-server/redis-cli not found (apt-get install $(REDIS_PACKAGES))"
	@$(HAVE_POSTGRES) || echo "make test: WARNING: the PostgreSQL tests were SKIPPED: initdb/postgres not found (apt-get install $(POSTGRES_PACKAGES))"
	@$(HAVE_BROWSER) || echo "make test: WARNING: the browser test of the live page was SKIPPED: chromium not found (apt-get install $(BROWSER_PACKAGES))"

## test-race: every test of the main module with the race detector, in random order
.PHONY: test-race
test-race:
	$(GO) test -race -shuffle=on -p 4 ./...

## test-allocs: the allocation guards (tests that count with
## testing.AllocsPerRun, named ...Alloc...) once more without the race
## detector, whose sync.Pool drops items at random: under -race they skip
.PHONY: test-allocs
test-allocs:
	$(GO) test -count=1 -run 'Alloc' $$(git grep -l AllocsPerRun -- '*_test.go' ':!bench' ':!deploy' | xargs -n1 dirname | sort -u | sed 's|^|./|')

## deps: what the tests need beyond Go: Redis, PostgreSQL and Chromium, installed from Debian's packages when run as root
deps: deps-redis deps-postgres deps-browser

# deps_install: $(1) the HAVE_ test, $(2) what it prints when found, $(3) what is
# missing, $(4) the _PACKAGES variable, $(5) which tests skip without it, $(6) the
# SLUICE_REQUIRE_ suffix that makes its absence a failure. Installs from Debian's
# packages when run as root with apt-get; otherwise warns.
define deps_install
@if $($(1)); then \
	echo "deps: $(2)"; \
elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	echo "deps: $(3) missing; installing $($(4)) from Debian's packages"; \
	set -x; \
	apt-get update -q && \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $($(4)); \
else \
	echo "deps: WARNING: $(3) not found, so $(5) will be SKIPPED."; \
	echo "deps: install with: sudo apt-get install $($(4))  (or run make test as root);"; \
	echo "deps: set SLUICE_REQUIRE_$(6)=1 to make the absence a failure."; \
fi
endef

deps-redis:
	$(call deps_install,HAVE_REDIS,$$(redis-server --version),redis-server/redis-cli,REDIS_PACKAGES,the Redis tests,REDIS)

deps-postgres:
	$(call deps_install,HAVE_POSTGRES,PostgreSQL found: $$(pg_config --version 2>/dev/null || ls -d /usr/lib/postgresql/*/bin),PostgreSQL's initdb/postgres,POSTGRES_PACKAGES,the PostgreSQL tests,POSTGRES)

deps-browser:
	$(call deps_install,HAVE_BROWSER,Chromium found: $$(chromium --version 2>/dev/null || chromium-browser --version 2>/dev/null || google-chrome --version),chromium,BROWSER_PACKAGES,the browser test of the live page,BROWSER)

vet:
	$(GO) vet ./...

## staticcheck: staticcheck at the version STATICCHECK pins, run from the Go
## module cache (no network once it is there: go run of a module at an
## exact version reads the cache first); its own cache keeps a rerun quick
staticcheck:
	$(GO) run $(STATICCHECK) ./...

## bench: the hot paths of the library, with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## bench-peers: Sluice side by side with x/time/rate, httprate, ulule/limiter and go-limiter
bench-peers:
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -count 5 -cpu 2

## bench-all: regenerate every current table of BENCHMARKS.md (its section "Generated by make bench-all"),
## Sluice and its peers (Go limiters, envoyproxy/ratelimit, NGINX) and the fleet on a Redis Cluster in the same run, each table stamped with
## commit, machine and load average; about 15 minutes on 2 cores, BENCH_QUICK=1 for a 2-minute check
.PHONY: bench-all
bench-all:
	bench/bench-all.sh

## lint: formatting, vet and staticcheck
lint: vet staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }

fmt:
	gofmt -w $$(git ls-files '*.go')

## docs: regenerate the charts of docs/algorithms.md with the simulator
.PHONY: docs
docs:
	$(GO) run ./cmd/sluice simulate -pattern boundary -duration 4m -chart docs/boundary.svg,docs/boundary.png
	$(GO) run ./cmd/sluice simulate -pattern bursts -chart docs/bursts.svg,docs/bursts.png
	$(GO) run ./cmd/sluice simulate -pattern ramp -chart docs/ramp.svg,docs/ramp.png
	$(GO) run ./cmd/sluice simulate -pattern bursts -queue -algorithms token_bucket,leaky_bucket -chart docs/queue.svg,docs/queue.png
	$(GO) run ./cmd/sluice simulate accuracy -requests 10000000 -keys 100000 -seed 1

## image: sluice's container image, built without a daemon (as the Dockerfile's): build/sluice-image
## (an OCI image layout) and build/sluice-image.tar (for docker load / podman load)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
.PHONY: image test-deploy
image:
	mkdir -p build
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o build/sluice ./cmd/sluice
	cd deploy && $(GO) run ./image -binary ../build/sluice -version $(VERSION) -revision $(REVISION) \
		-tag sluice:$(VERSION) -layout ../build/sluice-image -tarball ../build/sluice-image.tar

## test-deploy: deploy/'s own module, which `go test ./...` skips: the image (built, read back, run
## chrooted when root), the Kubernetes manifests and the Helm chart (helm lint when helm is installed)
test-deploy:
	cd deploy && $(GO) vet ./... && $(GO) test -shuffle=on ./...
