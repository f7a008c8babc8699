.DEFAULT_GOAL := help
GO ?= go

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

run: ## run rowq with embedded SQLite (./rowq.db) on 127.0.0.1:8080
	$(GO) run ./cmd/rowq serve

build: ## build ./bin/rowq
	$(GO) build -o bin/rowq ./cmd/rowq

test: ## run every test on MariaDB, PostgreSQL and SQLite (installs and starts them if needed)
	./scripts/test.sh

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

.PHONY: help run build test lint
