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

bench: build ## measure throughput and latency on SQLite, MariaDB and PostgreSQL (see docs/benchmarks.md)
	./bin/rowq bench --jobs 10000 --runs 3
	./bin/rowq bench --database-url mysql://root@127.0.0.1:3306/test --jobs 10000 --runs 3
	./bin/rowq bench --database-url 'postgres://postgres:rowq@127.0.0.1:5432/test?sslmode=disable' --jobs 10000 --runs 3
	./bin/rowq bench --database-url mysql://root@127.0.0.1:3306/test --jobs 2500 --rate 500 --runs 3
	./bin/rowq bench --database-url mysql://root@127.0.0.1:3306/test --jobs 100000 --batch 100 --runs 3
	./bin/rowq bench --database-url mysql://root@127.0.0.1:3306/test --backlog 10000 --runs 3
	@echo "the 1,000,000-job drain takes minutes: ./bin/rowq bench --database-url … --backlog 1000000 --runs 1"

ha: build ## the five-minute HA runs: chaos on a Galera cluster and on a PostgreSQL pair with failovers (docs/ha.md)
	./scripts/galera.sh start
	./scripts/pg-ha.sh start sync
	$(GO) test -count=1 -timeout 60m -tags 'ha halong' -run 'TestHA_' -v ./cmd/rowq/

CHAOS_DB ?= rowq_chaos
chaos: build ## 60 s of SIGKILL, SIGSTOP and worker faults (one every 6 s) under load on 3 nodes over MariaDB (database rowq_chaos, recreated; see docs/reliability.md)
	mysql -uroot -h127.0.0.1 -e 'DROP DATABASE IF EXISTS $(CHAOS_DB); CREATE DATABASE $(CHAOS_DB) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin'
	./bin/rowq chaos --database-url mysql://root@127.0.0.1:3306/$(CHAOS_DB) --nodes 3 --rate 300 --duration 60s --faults kill,stop,kill,worker --every 6s

lint: ## gofmt and go vet
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt needed"; exit 1; }
	$(GO) vet -tags ha ./...
	$(GO) vet -tags 'ha halong' ./...

.PHONY: help run build test ha bench chaos lint
