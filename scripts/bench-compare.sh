#!/usr/bin/env bash
# Compare two rowq builds with `rowq bench`, interleaved run by run so both
# see the same machine state, and print a Markdown table of medians and
# ratios (docs/benchmarks.md).
#
#   scripts/bench-compare.sh NEW_BIN BASE_BIN [RUNS] [MODE...]
#
# MODE is one of: mariadb postgres sqlite latency batch-mariadb batch-postgres
# drain drain-1m (default: all but drain-1m). Databases rowq_bench are
# recreated empty on the local MariaDB or PostgreSQL before each run on it.
#
# NEW_ARGS and BASE_ARGS (environment) add `rowq bench` flags to the new and
# the base runs, to compare settings of one build, e.g. auth and signing on
# against off:
#   NEW_ARGS="--auth --signing-secret whsec_…" scripts/bench-compare.sh bin/rowq bin/rowq 5 mariadb
set -euo pipefail
new=$1 base=$2 runs=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(mariadb postgres sqlite latency batch-mariadb batch-postgres drain)

my='mysql://root@127.0.0.1:3306/rowq_bench'
pg='postgres://postgres@127.0.0.1:5432/rowq_bench?sslmode=disable'

args_of() {
	case $1 in
	mariadb) echo "--database-url $my --jobs 10000" ;;
	postgres) echo "--database-url $pg --jobs 10000" ;;
	sqlite) echo "--jobs 10000" ;;
	latency) echo "--database-url $my --jobs 2500 --rate 500" ;;
	batch-mariadb) echo "--database-url $my --jobs 100000 --batch 100" ;;
	batch-postgres) echo "--database-url $pg --jobs 100000 --batch 100" ;;
	drain) echo "--database-url $my --backlog 10000" ;;
	drain-1m) echo "--database-url $my --backlog 1000000" ;;
	*) echo "unknown mode $1" >&2; exit 2 ;;
	esac
}

# fresh MODE: recreates the empty rowq_bench database the mode runs on.
fresh() {
	case $(args_of "$1") in
	*"$my"*) mysql -uroot -e 'DROP DATABASE IF EXISTS rowq_bench; CREATE DATABASE rowq_bench' ;;
	*"$pg"*) psql -q -U postgres -h 127.0.0.1 -d postgres -c 'DROP DATABASE IF EXISTS rowq_bench' -c 'CREATE DATABASE rowq_bench' ;;
	esac
}

# one BIN MODE [ARGS]: prints "rate enqueue p50 p99" of one run, or fails.
one() {
	local out
	fresh "$2"
	out=$("$1" bench $(args_of "$2") ${3:-} --runs 1 2>&1) || { echo "$out" >&2; return 1; }
	echo "$out" | grep -q 'lost=0 duplicates=0' || { echo "$out" >&2; return 1; }
	echo "$out" | sed -n 's/^median of 1 runs: end to end \([0-9]*\) jobs\/s, enqueue \([0-9]*\) jobs\/s, p50 \([^,]*\), p99 \(.*\)$/\1 \2 \3 \4/p'
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "| mode | new: rate (runs) | base: rate (runs) | ratio | new p50 / p99 | base p50 / p99 |"
echo "| --- | --- | --- | --- | --- | --- |"
for m in "${modes[@]}"; do
	: >/tmp/bc.new; : >/tmp/bc.base
	for _ in $(seq "$runs"); do
		one "$new" "$m" "${NEW_ARGS:-}" >>/tmp/bc.new
		one "$base" "$m" "${BASE_ARGS:-}" >>/tmp/bc.base
	done
	col=1
	case $m in batch-*) col=2 ;; esac # enqueue rate
	n=$(cut -d' ' -f$col /tmp/bc.new | median) b=$(cut -d' ' -f$col /tmp/bc.base | median)
	nl=$(awk -v m="$n" -v c=$col '$c==m {print $3 " / " $4; exit}' /tmp/bc.new)
	bl=$(awk -v m="$b" -v c=$col '$c==m {print $3 " / " $4; exit}' /tmp/bc.base)
	echo "| $m | **$n** ($(cut -d' ' -f$col /tmp/bc.new | paste -sd/ | sed 's|/| / |g')) | $b ($(cut -d' ' -f$col /tmp/bc.base | paste -sd/ | sed 's|/| / |g')) | $(awk -v n="$n" -v b="$b" 'BEGIN {printf "%.2f×", n/b}') | $nl | $bl |"
done
