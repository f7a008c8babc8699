#!/usr/bin/env bash
# Latency of deliveries at 500 jobs/s while a queue's leader prunes a large
# history of finished jobs (issue 31, docs/lifecycle.md), against the same
# load without it, on the local MariaDB:
#
#   scripts/prune-latency.sh [BIN] [ROWS]     (defaults: bin/rowq, 1000000)
#
# One `rowq serve` leads a queue "hist" that keeps its finished jobs for a
# minute; ROWS rows two days old are written into its history; once its
# leader's prune has begun, `rowq bench --rate 500` runs against the same
# node. The baseline is the same bench before the rows are written.
set -euo pipefail
bin=${1:-bin/rowq} rows=${2:-1000000}
db=rowq_prune port=18181
url="mysql://root@127.0.0.1:3306/$db" api="http://127.0.0.1:$port"
bench=(bench --server "$api" --rate 500 --jobs 15000 --runs 1)

mysql -uroot -e "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
"$bin" migrate --database-url "$url" >/dev/null
"$bin" serve --database-url "$url" --bind "127.0.0.1:$port" >/tmp/prune-latency.log 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
until curl -fs "$api/healthz" >/dev/null; do sleep 0.2; done
curl -fs -X PUT "$api/queue/hist" -d '{"keep_finished": 60}' >/dev/null

echo "baseline (no prune):"
"$bin" "${bench[@]}" 2>&1 | grep '^median'

count() { mysql -uroot -N -e "SELECT COUNT(*) FROM $db.finished_jobs WHERE queue_name = 'hist'"; }
digits='(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)'
mysql -uroot "$db" -e "INSERT INTO finished_jobs
	(id, queue_name, category, url, payload, status, attempts, created_at, started_at, finished_at, message, result)
	SELECT 1000000000 + a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d, 'hist', 'cat', 'http://w/x', '{\"n\":1}', 'succeeded', 1,
		NOW(6) - INTERVAL 2 DAY, NOW(6) - INTERVAL 2 DAY, NOW(6) - INTERVAL 2 DAY, '', '{\"ok\":true}'
	FROM $digits a, $digits b, $digits c, $digits e, $digits f, $digits g
	LIMIT $rows"
echo "history of hist: $(count) rows; waiting for its leader's prune to begin (at most a minute)"
until [ "$(count)" -lt "$rows" ]; do sleep 0.5; done
start=$(date +%s.%N)
( until [ "$(count)" -eq 0 ]; do sleep 0.5; done; echo "prune of $rows rows: $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}') s (from its first commit seen)" ) &
watcher=$!
echo "while pruning:"
"$bin" "${bench[@]}" 2>&1 | grep '^median'
echo "rows left when the bench ended: $(count)"
wait $watcher
