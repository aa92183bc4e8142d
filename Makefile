# Run `make` or `make help` for the list of targets.

GO ?= go
WITHPG := tests/bin/withpg

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z0-9_-]+:.*## / { printf "  %-22s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the sidecar into bin/ordertimeout and the fake payment gateway into bin/ordertimeout-fakegateway
	$(GO) build -buildvcs=auto -o bin/ordertimeout ./sidecar/cmd/ordertimeout
	$(GO) build -o bin/ordertimeout-fakegateway ./sidecar/cmd/ordertimeout-fakegateway

# DEMO_FLAGS go to the demo driver, e.g. make demo DEMO_FLAGS='--keep --duration 30s'
# (make demo DEMO_FLAGS=--help lists them, without starting a server). The
# demo needs only the server: WITHPG_DEPS=server installs nothing the tests
# alone need.
.PHONY: demo
demo: build ## Run the whole lifecycle on a private PostgreSQL in about a minute
	$(GO) build -o bin/ordertimeout-demo ./sidecar/cmd/ordertimeout-demo
	@case " $(DEMO_FLAGS) " in \
	*" -h "* | *" -help "* | *" --help "*) bin/ordertimeout-demo $(DEMO_FLAGS) ;; \
	*) echo 'WITHPG_DEPS=server $(WITHPG) bin/ordertimeout-demo $(DEMO_FLAGS)'; \
	   WITHPG_DEPS=server $(WITHPG) bin/ordertimeout-demo $(DEMO_FLAGS) ;; \
	esac

# BENCH_FLAGS go to the benchmark, e.g. make bench BENCH_FLAGS='--scenarios drain --runs 5'
# (bin/ordertimeout-bench --help lists them). JSON lines go to stdout and
# $(BENCH_OUT)/results.jsonl, the summary to $(BENCH_OUT)/summary.md, SVG plots
# to $(BENCH_OUT)/. The private server runs with production's settings: fsync,
# synchronous_commit and full_page_writes on; BENCH_FLAGS='--fast-settings'
# starts it with the three off (and tells the benchmark so). The Redis
# sorted-set baseline needs redis-server: tests/bin/ensure-redis installs it
# (only the benchmark needs it; without it the baseline is skipped).
BENCH_OUT ?= .cache/bench
BENCH_PG_DURABLE := -c fsync=on -c synchronous_commit=on -c full_page_writes=on
BENCH_PG_FAST := -c fsync=off -c synchronous_commit=off -c full_page_writes=off
BENCH_PG_OPTS = $(if $(findstring --fast-settings,$(BENCH_FLAGS)),$(BENCH_PG_FAST),$(BENCH_PG_DURABLE))
BENCH_RUN = mkdir -p $(BENCH_OUT) && \
	{ tests/bin/ensure-redis || echo "bench: no redis-server: the ZSet baseline will be skipped" >&2; } && \
	$(GO) build -o bin/ordertimeout-bench ./tests/bench && \
	WITHPG_OPTS="$(BENCH_PG_OPTS) $$WITHPG_OPTS" $(WITHPG) bin/ordertimeout-bench --plot-dir $(BENCH_OUT) \
	--json-out $(BENCH_OUT)/results.jsonl --md-out $(BENCH_OUT)/summary.md

.PHONY: bench
bench: build ## Run the standard workload (docs/workload.md) on a private PostgreSQL; results and plots in .cache/bench
	$(BENCH_RUN) $(BENCH_FLAGS)

.PHONY: bench-quick
bench-quick: build ## Run the standard workload at small sizes in a few minutes (a smoke check of make bench)
	$(BENCH_RUN) --quick $(BENCH_FLAGS)

.PHONY: test
test: ## Run every test (migrations, pgTAP, Go) on a private PostgreSQL, or on DATABASE_URL if set
	$(WITHPG) tests/bin/test-all

.PHONY: test-sql
test-sql: ## Run the pgTAP tests (tests/pgtap) with pg_prove
	$(WITHPG) tests/bin/run-pgtap

.PHONY: test-go
test-go: ## Run the Go tests
	$(WITHPG) $(GO) test -count=1 ./...

.PHONY: test-sidecar
test-sidecar: ## Run the sidecar's Go tests (real PostgreSQL, River, fake gateway, kill -9)
	$(WITHPG) $(GO) test -count=1 ./sidecar/...

# FAKE_FLAGS go to the fake gateway, e.g. make fakegateway FAKE_FLAGS='--listen 127.0.0.1:8071'.
.PHONY: fakegateway
fakegateway: build ## Run the fake payment gateway (bin/ordertimeout-fakegateway --help)
	bin/ordertimeout-fakegateway $(FAKE_FLAGS)

# The model test's long run: MODEL_DURATION of sessions on up to MODEL_ORDERS
# orders; MODEL_SEED replays the choices of a failed run (its seed is printed).
MODEL_DURATION ?= 2m
MODEL_ORDERS ?= 20000

.PHONY: soak-model
soak-model: ## Run the randomized model test for MODEL_DURATION (default 2m) on MODEL_ORDERS orders
	$(WITHPG) $(GO) test -count=1 -timeout 0 -v -run '^TestModel$$' ./tests/model \
		-model.duration $(MODEL_DURATION) -model.orders $(MODEL_ORDERS) $(if $(MODEL_SEED),-model.seed $(MODEL_SEED))

# The soak run: SOAK_DURATION of orders at SOAK_RATE per second against two
# sidecars on a private PostgreSQL cluster that it restarts, with a random
# fault every few seconds (kill -9 of a sidecar, pg_terminate_backend,
# PostgreSQL restart fast/immediate, gateway down/slow). SOAK_FLAGS go to the
# program (bin/ordertimeout-soak --help lists them), e.g. SOAK_FLAGS='--seed 42'
# to replay a run. It prints progress and a report, and exits 1 on a violation.
SOAK_DURATION ?= 10m
SOAK_RATE ?= 1000

.PHONY: soak
soak: build ## Run SOAK_DURATION (default 10m) at SOAK_RATE orders/s (default 1000) with random faults; fails on a violation
	tests/bin/ensure-deps
	$(GO) build -o bin/ordertimeout-soak ./tests/soak
	bin/ordertimeout-soak --bin bin/ordertimeout --duration $(SOAK_DURATION) --rate $(SOAK_RATE) $(SOAK_FLAGS)

# The fuzzers of tests/fuzz, one after the other (go test fuzzes one target at
# a time); a failing input lands in tests/fuzz/testdata/fuzz/. Every input
# costs database round trips, so minimizing is bounded by executions, not by
# the default minute.
FUZZTIME ?= 30s
FUZZERS := FuzzCreateOrder FuzzIDs

.PHONY: fuzz
fuzz: ## Run the fuzzers for FUZZTIME (default 30s) each
	$(WITHPG) sh -c 'for f in $(FUZZERS); do $(GO) test -run "^$$" -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) \
		-fuzzminimizetime 300x ./tests/fuzz || exit 1; done'

.PHONY: check-migrations
check-migrations: ## Check migrations/ goes up, down, up and matches sql/install.sql
	$(WITHPG) tests/bin/check-migrations

# River's migrations 000001-000008 are generated from the River module in
# go.mod; with River v0.51.2 this rewrites them byte for byte. A River release
# with a new migration version needs a new migration number of its own (the
# next free one), not this target. Migration 000009 was generated from
# sql/install.sql by tests/bin/gen-initial-migration until it shipped; that
# generator is retired (see README, Development). From 000012 on, a schema
# change's migration is written by make gen-migration.
.PHONY: gen-river-migrations
gen-river-migrations: ## Rewrite River's migrations 000001-000008 from the River module (reproduces the shipped files)
	$(GO) run ./sidecar/cmd/genrivermigrations -dir migrations

# A schema change's migration: make gen-migration FROM=<commit before the
# change> NAME=NNNNNN_verb_object writes migrations/NAME.up.sql and .down.sql
# with sidecar/cmd/genmigration from what plpgsql/ and sql/views.sql changed
# since FROM (functions, procedures, views, their grants), up to the working
# tree or to the commit TO names. Statements on
# tables are hand-written in migrations/hand/NAME.up-prelude.sql (before the
# generated up) and NAME.down-postlude.sql (after the generated down), the why
# in NAME.comment.txt; those that exist are passed. FORCE=1 writes an
# unreleased migration again; EXCLUDE=name,... leaves out the functions a
# later migration changes (000013 changes resolve_conflict):
#   make gen-migration FROM=daea0a1 NAME=000012_own_river_tables_in_jobs EXCLUDE=resolve_conflict FORCE=1
HAND = migrations/hand/$(NAME)
.PHONY: gen-migration
gen-migration: ## Write migrations/NAME.{up,down}.sql from what plpgsql/ and sql/views.sql changed since FROM (TO=, EXCLUDE=, FORCE=1)
	@test -n "$(FROM)" -a -n "$(NAME)" || { echo "usage: make gen-migration FROM=<git revision> NAME=NNNNNN_verb_object [TO=<git revision>] [EXCLUDE=name,...] [FORCE=1]" >&2; exit 2; }
	$(GO) run ./sidecar/cmd/genmigration -from '$(FROM)' -name '$(NAME)' \
		$(if $(TO),-to '$(TO)') $(if $(EXCLUDE),-exclude '$(EXCLUDE)') \
		$(if $(wildcard $(HAND).up-prelude.sql),-up-prelude $(HAND).up-prelude.sql) \
		$(if $(wildcard $(HAND).down-postlude.sql),-down-postlude $(HAND).down-postlude.sql) \
		$(if $(wildcard $(HAND).comment.txt),-comment $(HAND).comment.txt) \
		$(if $(FORCE),-force)
	@echo "now run make fingerprints: migrations/fingerprints.txt needs the new schema's fingerprint"

# After a new migration (or one written again), record the schema's
# fingerprint after each migration, which `ordertimeout migrate` reads to tell
# whether a migration left dirty committed; TestFingerprints (in make test)
# fails until it is done.
.PHONY: fingerprints
fingerprints: ## Write migrations/fingerprints.txt, the schema's fingerprint after each migration
	$(WITHPG) $(GO) test -count=1 -run '^TestFingerprints$$' ./migrations/ -args -update

.PHONY: vet
vet: ## Run go vet
	$(GO) vet ./...

.PHONY: clean
clean: ## Remove bin/ and .cache/
	rm -rf bin .cache
