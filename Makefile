# rushgate — `make help` lists the targets.
SHELL := /bin/bash
GO    ?= go
PKGS  := ./...

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: run
run: ## build bin/rushgate (seconds on a warm build cache) and run it on the embedded default (in-memory, no setup needed)
	$(GO) build -o bin/ ./cmd/rushgate
	./bin/rushgate serve

.PHONY: build
build: ## build bin/rushgate and bin/rushgate-load
	$(GO) build -o bin/ ./cmd/...

.PHONY: test
test: ## run every test with -race against the local Postgres, MariaDB and Redis
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 40m $(PKGS)

.PHONY: test-twice
test-twice: ## run make test in two clean clones of HEAD at once, on the same services (both must pass)
	bash scripts/test-twice.sh

.PHONY: lint
lint: ## golangci-lint (pinned in tools/go.mod, apart from the library's go.mod; gofmt, vet, staticcheck, errcheck …) and the dependency rule
	# Another checkout's lint may run at the same time (two CI jobs on one runner): both proceed.
	$(GO) tool -modfile=tools/go.mod golangci-lint run --allow-parallel-runners $(PKGS)
	$(GO) test -count=1 ./test/architecture/

.PHONY: generate
generate: ## regenerate mocks
	$(GO) generate $(PKGS)

.PHONY: migrate
migrate: ## apply the schema to RUSHGATE_DATABASE_URL
	$(GO) run ./cmd/rushgate migrate

.PHONY: services
services: ## start Postgres, MariaDB and Redis (install them with apt-get if missing)
	bash scripts/services.sh

.PHONY: load
load: ## every load scenario on Postgres and MySQL, 1 and 2 instances, each against its ceiling (LOAD_DBS, LOAD_INSTANCES, LOAD_SCENARIOS, LOAD_FLAGS)
	bash scripts/load.sh
