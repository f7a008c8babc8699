#!/usr/bin/env bash
# profile-serve.sh: where a serving node's time goes under ceiling.sh's load.
#
#   scripts/profile-serve.sh [GIT_REV | BINARY] [OUT_DIR]   (default: the work tree, /tmp/rowq-profile)
#
# Builds rowq with -tags pprof (cmd/rowq/pprof.go), starts `rowq serve` on a fresh
# MariaDB database (DB=postgres: PostgreSQL; DB=sqlite: a new SQLite file), drives it with ../shared/bench/qbench (one job a request, 16
# clients, 100 workers, 30,000 jobs) and writes to OUT_DIR:
#   cpu.prof      a CPU profile of the node over the middle of the run
#   allocs.prof   the node's allocations (whole life of the process: go tool pprof -sample_index=alloc_objects)
#   allocs.txt    its allocation counts (Mallocs, TotalAlloc, NumGC)
#   summary.txt   jobs/s and CPU seconds per 1,000 jobs of the node, mariadbd and qbench
# With ROWQ_BLOCK_PROFILE=1 it writes block.prof too: every time a goroutine of the node
# blocked on a channel, a select or a lock (go tool pprof -sample_index=contentions).
# With STRACE=1 it counts the node's system calls per job instead (strace -c -f), which
# slows the node: its rate is then not comparable.
set -euo pipefail
rev=${1:-} out=${2:-/tmp/rowq-profile}
root=$(cd "$(dirname "$0")/.." && pwd)
shared=$root/../shared/bench
mkdir -p "$out"; T=$(mktemp -d); PIDS=()
trap 'for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$T"' EXIT
if [ -f "$rev" ] && [ -x "$rev" ]; then
	cp "$rev" "$T/rowq" # a binary built with -tags pprof
elif [ -n "$rev" ]; then
	git -C "$root" worktree add --detach "$T/src" "$rev" >/dev/null
	cp "$root/cmd/rowq/pprof.go" "$T/src/cmd/rowq/" 2>/dev/null || true
	(cd "$T/src" && go build -tags pprof -o "$T/rowq" ./cmd/rowq)
	git -C "$root" worktree remove --force "$T/src"
else
	(cd "$root" && go build -tags pprof -o "$T/rowq" ./cmd/rowq)
fi
(cd "$shared/qbench" && go build -o "$T/qbench" .)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
case ${DB:-mariadb} in
mariadb)
	mysql -uroot -h127.0.0.1 -e 'DROP DATABASE IF EXISTS rowq_profile; CREATE DATABASE rowq_profile'
	url=mysql://root@127.0.0.1:3306/rowq_profile dbproc=mariadbd ;;
postgres)
	psql -q -U postgres -h 127.0.0.1 -d postgres -c 'DROP DATABASE IF EXISTS rowq_profile' -c 'CREATE DATABASE rowq_profile'
	url='postgres://postgres@127.0.0.1:5432/rowq_profile?sslmode=disable' dbproc=postgres ;;
sqlite) url=sqlite://$T/rowq.db dbproc= ;;
*) echo "DB: mariadb (the default), postgres or sqlite, not $DB" >&2; exit 2 ;;
esac
qp=$(port) pp=$(port)
(cd "$T" && ROWQ_PPROF_ADDR=127.0.0.1:$pp exec "$T/rowq" serve --bind 127.0.0.1:$qp \
	--database-url "$url" >"$out/serve.log" 2>&1) & PIDS+=($!)
for _ in $(seq 1 100); do curl -fs http://127.0.0.1:$qp/version >/dev/null 2>&1 && break; sleep 0.1; done
node=$(pgrep -f "rowq serve --bind 127.0.0.1:$qp" | head -1)
pids="node=$node"
[ -n "$dbproc" ] && pids="$pids,db=$(pgrep -x -o "$dbproc")" # PostgreSQL: its postmaster only
if [ "${STRACE:-}" = 1 ]; then
	strace -c -f -o "$out/strace.txt" -p "$node" & PIDS+=($!); sleep 1
else
	(sleep 2; curl -fs "http://127.0.0.1:$pp/debug/pprof/profile?seconds=${PROF_SECONDS:-3}" -o "$out/cpu.prof") & PIDS+=($!)
fi
n=${N:-30000}
"$T/qbench" -base http://127.0.0.1:$qp -n $n -c 16 -workers 100 -worker-addr 127.0.0.1:$(port) \
	-timeout 20s -settle 300ms -pids "$pids" >"$T/q.json" 2>"$T/q.err"
if [ "${STRACE:-}" = 1 ]; then kill -INT "${PIDS[-1]}"; fi
wait "${PIDS[-1]}" 2>/dev/null || true
curl -fs "http://127.0.0.1:$pp/debug/pprof/allocs" -o "$out/allocs.prof"
[ "${ROWQ_BLOCK_PROFILE:-}" = 1 ] && curl -fs "http://127.0.0.1:$pp/debug/pprof/block" -o "$out/block.prof"
curl -fs "http://127.0.0.1:$pp/debug/pprof/allocs?debug=1" | sed -n 's/^# \(Mallocs\|TotalAlloc\|NumGC\) = \(.*\)/\1 \2/p' >"$out/allocs.txt"
python3 - "$T/q.json" "$n" "$out/allocs.txt" <<'PY' | tee "$out/summary.txt"
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); n = int(sys.argv[2])
print("e2e %.0f jobs/s, lost %d, duplicates %d, p50 %s ms, p99 %s ms" % (r["e2e_rate"], r["lost"], r["duplicates"], r["latency_ms"]["p50"], r["latency_ms"]["p99"]))
print("CPU seconds per 1,000 jobs: " + ", ".join("%s %.3f" % (k, v * 1000 / n) for k, v in sorted(r["cpu_seconds"].items())))
a = dict(l.split(None, 1) for l in open(sys.argv[3]) if l.strip())
if "Mallocs" in a: print("node allocations per job (whole life of the process): %.0f, bytes %.0f" % (int(a["Mallocs"]) / n, int(a["TotalAlloc"]) / n))
PY
[ "${STRACE:-}" = 1 ] && python3 - "$out/strace.txt" "$n" <<'PY'
import sys
n = int(sys.argv[2])
for l in open(sys.argv[1]):
    f = l.split()
    if len(f) >= 5 and f[3].isdigit():
        name = f[-1]; calls = int(f[3]); errs = int(f[4]) if len(f) == 6 else 0
        if calls / n >= 0.01: print("%-14s %6.2f per job (errors %.2f)" % (name, calls / n, errs / n))
PY
exit 0
