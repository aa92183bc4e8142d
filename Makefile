# Run `make` or `make help` for the list of targets.

GO ?= go
WITHPG := tests/bin/withpg

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z0-9_-]+:.*## / { printf "  %-22s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build the sidecar into bin/ordertimeout
	$(GO) build -o bin/ordertimeout ./sidecar/cmd/ordertimeout

.PHONY: test
test: ## Run every test (migrations, pgTAP, Go) on a private PostgreSQL, or on DATABASE_URL if set
	$(WITHPG) tests/bin/test-all

.PHONY: test-sql
test-sql: ## Run the pgTAP tests (tests/pgtap) with pg_prove
	$(WITHPG) tests/bin/run-pgtap

.PHONY: test-go
test-go: ## Run the Go tests
	$(WITHPG) $(GO) test -count=1 ./...

.PHONY: check-migrations
check-migrations: ## Check migrations/ goes up, down, up and matches sql/install.sql
	$(WITHPG) tests/bin/check-migrations

.PHONY: gen-river-migrations
gen-river-migrations: ## Write River's migrations (versions 1-8) into migrations/
	$(GO) run ./sidecar/cmd/genrivermigrations -dir migrations

.PHONY: gen-initial-migration
gen-initial-migration: ## Write migrations/000009_create_ordertimeout.up.sql from sql/install.sql
	tests/bin/gen-initial-migration

.PHONY: vet
vet: ## Run go vet
	$(GO) vet ./...

.PHONY: clean
clean: ## Remove bin/ and .cache/
	rm -rf bin .cache
