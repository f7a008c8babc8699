#!/usr/bin/env bash
# Measure what idle queues cost: start `rowq serve` on a fresh MariaDB
# database, create N queues with no jobs, let them settle, and count over
# 30 s (WINDOW) the statements the server receives from rowq, the rows they read, and
# the CPU of MariaDB's threads serving rowq and of rowq (docs/architecture.md,
# "Idle queues").
#
# The CPU is counted twice: as the whole mariadbd and rowq processes (what
# the machine spends, MariaDB's own background work included, so nothing
# else may use MariaDB meanwhile), and as the server threads serving rowq:
# rowq connects as a user of its own, rowq_idle, and MariaDB's per-user
# statistics (userstat, turned on here) count its statements, the rows
# they read and their threads' CPU. Then it enqueues 200 jobs, 20 a second,
# to one of the idle queues through the node that leads it, after a PUT of
# the queue and of a routing to it (rowq bench --queue), and prints their
# enqueue-to-delivery latency, as the idle queues' tenants see it.
#
#   scripts/idle-cost.sh ROWQ_BIN [N]
set -euo pipefail
bin=$1 n=${2:-1000} port=18099
mysql -uroot -e "DROP DATABASE IF EXISTS rowq_idle; CREATE DATABASE rowq_idle;
	CREATE USER IF NOT EXISTS rowq_idle@'127.0.0.1'; GRANT ALL ON rowq_idle.* TO rowq_idle@'127.0.0.1';
	SET GLOBAL userstat = 1"
ROWQ_BIND=127.0.0.1:$port "$bin" serve --database-url mysql://rowq_idle@127.0.0.1:3306/rowq_idle >/tmp/rowq-idle.log 2>&1 &
rowq=$!
trap 'kill $rowq' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/queues" >/dev/null && break; sleep 0.2; done
# The queues straight into the table (a PUT each takes minutes at 100,000):
# the node claims them at its next refresh.
mysql -uroot rowq_idle -e "CREATE TEMPORARY TABLE d (x INT); INSERT INTO d VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);
	INSERT INTO queues (name, polling_interval, max_workers, created_at, updated_at)
	SELECT CONCAT('idle', i), 200, 20, NOW(6), NOW(6) FROM (
		SELECT a.x + 10 * b.x + 100 * c.x + 1000 * e.x + 10000 * f.x + 100000 * g.x AS i
		FROM d a, d b, d c, d e, d f, d g) s WHERE i < $n"
sleep "${SETTLE:-20}" # every queue led, every runner past its first grab
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# user: statements, rows read, CPU seconds of the server's threads for rowq_idle
user() { mysql -uroot -N -e "SELECT SELECT_COMMANDS + UPDATE_COMMANDS + OTHER_COMMANDS, ROWS_READ, CPU_TIME
	FROM information_schema.USER_STATISTICS WHERE USER = 'rowq_idle'"; }
maria=$(pidof mariadbd)
read -r q0 rows0 cpu0 < <(user)
r0=$(ticks "$rowq") m0=$(ticks "$maria")
sleep "${WINDOW:-30}"
read -r q1 rows1 cpu1 < <(user)
r1=$(ticks "$rowq") m1=$(ticks "$maria")
# Ticks are hundredths of a second: over w seconds, ticks / w is the
# percentage of one core. The window spans a leadership cycle's full read
# of the queues (every 30th cycle), so that its rows count as often as
# they come.
rss=$(awk '/^VmRSS/ {print int($2 / 1024)}' "/proc/$rowq/status")
w=${WINDOW:-30}
pct() { awk -v t="$1" -v w="$w" 'BEGIN {printf "%.1f", t / w}'; }
echo "$n idle queues: $(((q1 - q0) / w)) statements/s, $(((rows1 - rows0) / w)) rows read/s; CPU of whole processes: mariadbd $(pct $((m1 - m0))) % + rowq $(pct $((r1 - r0))) % = $(pct $((m1 - m0 + r1 - r0))) % of one core; MariaDB's threads for rowq $(awk -v a="$cpu0" -v b="$cpu1" -v w="$w" 'BEGIN {printf "%.1f", (b - a) * 100 / w}') %; rowq RSS $rss MB; load average $(cut -d' ' -f1 /proc/loadavg)"
timeout 120 "$bin" bench --server "http://127.0.0.1:$port" --queue "idle$((n / 2))" --rate 20 --jobs 200 --clients 1 --runs 1 2>&1 | grep -iE 'p50|jobs/s' | head -5
