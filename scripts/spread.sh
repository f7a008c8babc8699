#!/usr/bin/env bash
# Measure how queues spread over nodes: start three `rowq serve` on a fresh
# MariaDB database with N queues (written straight into the table), then a
# fourth node, then stop one, and print after each step how long it took
# until every node led its share, ⌊N/nodes⌋ or ⌈N/nodes⌉ (GET /nodes;
# docs/architecture.md, "Spread").
#
#   scripts/spread.sh ROWQ_BIN [N]
set -euo pipefail
bin=$1 n=${2:-10000} db=rowq_spread
mysql -uroot -e "DROP DATABASE IF EXISTS $db; CREATE DATABASE $db"
url=mysql://root@127.0.0.1:3306/$db
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
start() { # PORT
	ROWQ_BIND=127.0.0.1:$1 "$bin" serve --database-url "$url" --node-id "node$1" >"/tmp/rowq-spread-$1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 100); do curl -sf "localhost:$1/healthz" >/dev/null && return; sleep 0.1; done
	echo "node on port $1 did not start" >&2; exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f", b - a}'; }
# spread NODES: waits until NODES nodes each lead their share of the
# queues (the N written, and the default queue), prints how long it took.
spread() {
	local t=$(now)
	until curl -sf localhost:18101/nodes | jq -e --argjson k "$1" \
		'(.nodes | length) == $k and all(.nodes[]; .queues >= ($q / $k | floor) and .queues <= ($q / $k | ceil))' \
		--argjson q "$(curl -sf localhost:18101/nodes | jq .queues)" >/dev/null; do
		sleep 0.2
	done
	echo "$1 nodes: $(curl -sf localhost:18101/nodes | jq -r '[.nodes[].queues | tostring] | join("/")') after $(since "$t") s"
}
start 18101; start 18102; start 18103
mysql -uroot "$db" -e "CREATE TEMPORARY TABLE d (x INT); INSERT INTO d VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);
	INSERT INTO queues (name, polling_interval, max_workers, created_at, updated_at)
	SELECT CONCAT('idle', i), 200, 20, NOW(6), NOW(6) FROM (
		SELECT a.x + 10 * b.x + 100 * c.x + 1000 * e.x + 10000 * f.x + 100000 * g.x AS i
		FROM d a, d b, d c, d e, d f, d g) s WHERE i < $n"
echo "$n queues, load average $(cut -d' ' -f1 /proc/loadavg)"
spread 3
start 18104
spread 4
kill "${pids[1]}" # SIGTERM: a clean stop gives its queues up
spread 3
