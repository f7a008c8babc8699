#!/usr/bin/env bash
# Enqueue on the node that does not lead the queue: two `rowq serve` on the
# local MariaDB (database rowq_bench, recreated), queue tq created on node A
# so that A leads it, and `rowq bench --server` driving node B.
#
#   scripts/two-node.sh SERVER_BIN BENCH_BIN [bench flags]   (default: --jobs 2500 --rate 500)
#
# BENCH_BIN needs `rowq bench --queue` (5c39557 or later); SERVER_BIN may be
# any build, so that builds without nudges can be compared.
set -euo pipefail
bin=$1 bench=$2
shift 2
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--jobs 2500 --rate 500)
db='mysql://root@127.0.0.1:3306/rowq_bench'
a=http://127.0.0.1:18081 b=http://127.0.0.1:18082
wait_for() { for _ in $(seq 100); do curl -sf -o /dev/null "$1" && return; sleep 0.1; done; echo "no answer from $1" >&2; exit 1; }

mysql -uroot -e 'DROP DATABASE IF EXISTS rowq_bench; CREATE DATABASE rowq_bench'
"$bin" serve --database-url "$db" --bind 127.0.0.1:18081 >/tmp/two-node-a.log 2>&1 &
pa=$!
trap 'kill $pa ${pb:-} 2>/dev/null; wait 2>/dev/null' EXIT
wait_for $a/healthz
curl -sf -X PUT $a/queue/tq -d '{"max_workers":100}' >/dev/null
wait_for $a/queue/tq/node
"$bin" serve --database-url "$db" --bind 127.0.0.1:18082 >/tmp/two-node-b.log 2>&1 &
pb=$!
wait_for $b/healthz
echo "queue tq is led by $(curl -s $b/queue/tq/node); driving $b"
"$bench" bench --server $b --queue tq --runs 3 "${args[@]}" | tail -1
