#!/usr/bin/env bash
# Measure what idle queues cost: start `rowq serve` on a fresh MariaDB
# database, create N queues with no jobs, let them settle, and count over
# 10 s the statements the server receives and the CPU of mariadbd and rowq
# (docs/architecture.md, "Idle queues").
#
#   scripts/idle-cost.sh ROWQ_BIN [N]
set -euo pipefail
bin=$1 n=${2:-1000} port=18099
mysql -uroot -e 'DROP DATABASE IF EXISTS rowq_idle; CREATE DATABASE rowq_idle'
ROWQ_BIND=127.0.0.1:$port "$bin" serve --database-url mysql://root@127.0.0.1:3306/rowq_idle >/tmp/rowq-idle.log 2>&1 &
rowq=$!
trap 'kill $rowq' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/queues" >/dev/null && break; sleep 0.2; done
seq 1 "$n" | xargs -P 8 -I@ curl -sf -o /dev/null -X PUT -d '{}' "http://127.0.0.1:$port/queue/idle@"
sleep 20 # every queue led, every runner past its first grab
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
questions() { mysql -uroot -N -e "SHOW GLOBAL STATUS LIKE 'Questions'" | awk '{print $2}'; }
m=$(pidof mariadbd)
q0=$(questions) m0=$(ticks "$m") r0=$(ticks "$rowq")
sleep 10
q1=$(questions) m1=$(ticks "$m") r1=$(ticks "$rowq")
# Ticks are hundredths of a second: over 10 s, a tenth of them is the
# percentage of one core.
echo "$n idle queues: $(((q1 - q0) / 10)) statements/s; CPU: mariadbd $(awk -v t=$((m1 - m0)) 'BEGIN {print t / 10}') %, rowq $(awk -v t=$((r1 - r0)) 'BEGIN {print t / 10}') % of one core"
