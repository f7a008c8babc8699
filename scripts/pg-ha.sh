#!/usr/bin/env bash
# A PostgreSQL primary and a streaming standby on loopback, for rowq's HA
# tests and chaos runs (docs/ha.md). It leaves the default server on 5432 alone.
#
#   scripts/pg-ha.sh start [sync|async]   a primary and a standby (sync: synchronous_standby_names = '*')
#   scripts/pg-ha.sh failover             stop the primary at once (immediate), promote the standby
#   scripts/pg-ha.sh rejoin [sync|async]  make the stopped server a standby of the new primary
#   scripts/pg-ha.sh stop                 stop both servers
#   scripts/pg-ha.sh status               one line per server
#   scripts/pg-ha.sh url                  rowq's database URL (both hosts, target_session_attrs=read-write)
#   scripts/pg-ha.sh destroy              stop and remove the data
#
# The servers listen on ROWQ_PGHA_PORT and the port after it (default 5441,
# 5442); data lives in ROWQ_PGHA_DIR (default /var/tmp/rowq-pg-ha). `start`
# reuses a running pair in the mode asked for, and otherwise makes a fresh one:
# the data is disposable.
#
# After a failover in sync mode the new primary has no standby, so, as
# Patroni's non-strict synchronous mode does, the script turns the
# synchronous standby requirement off until `rejoin` brings a standby back.
set -euo pipefail

base=${ROWQ_PGHA_PORT:-5441}
dir=${ROWQ_PGHA_DIR:-/var/tmp/rowq-pg-ha}
servers=(a b)

say() { printf '==> pg-ha: %s\n' "$*" >&2; }
die() { printf 'pg-ha: %s\n' "$*" >&2; exit 1; }

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || die "PostgreSQL is not installed (scripts/test.sh installs it)"
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }

port() { case $1 in a) echo "$base" ;; b) echo $((base + 1)) ;; esac; }
sdir() { echo "$dir/$1"; }
other() { case $1 in a) echo b ;; b) echo a ;; esac; }
pgctl() { local s=$1; shift; as_pg "$bin/pg_ctl" -D "$(sdir "$s")/data" "$@"; }
up() { [ -f "$(sdir "$1")/data/postmaster.pid" ] && as_pg "$bin/pg_ctl" -D "$(sdir "$1")/data" status >/dev/null 2>&1; }
sql() { local s=$1; shift; psql -X -qAt -h 127.0.0.1 -p "$(port "$s")" -U postgres -d postgres -c "$*" 2>/dev/null; }
is_primary() { up "$1" && [ "$(sql "$1" 'SELECT pg_is_in_recovery()')" = f ]; }
is_standby() { up "$1" && [ "$(sql "$1" 'SELECT pg_is_in_recovery()')" = t ]; }
streaming() { [ "$(sql "$1" "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" -ge 1 ] 2>/dev/null; }
primary() { local s; for s in "${servers[@]}"; do is_primary "$s" && { echo "$s"; return 0; }; done; return 1; }
sync_names() { case $1 in sync) echo "'*'" ;; async) echo "''" ;; *) die "mode is sync or async, not $1" ;; esac; }
mode_of() { [ "$(sql "$1" 'SHOW synchronous_standby_names')" = '*' ] && echo sync || echo async; }

wait_for() { # seconds what command...
	local n=$1 what=$2; shift 2
	for _ in $(seq $((n * 5))); do "$@" && return 0; sleep 0.2; done
	die "$what did not happen within ${n}s (logs in $dir/*/log)"
}

launch() { # server
	local s=$1
	pgctl "$s" -l "$(sdir "$s")/log" -o "-p $(port "$s") -k $(sdir "$s")" -w -t 60 start >/dev/null \
		|| die "server $s did not start (see $(sdir "$s")/log)"
}

set_sync() { # server mode
	sql "$1" "ALTER SYSTEM SET synchronous_standby_names = $(sync_names "$2")" >/dev/null
	sql "$1" 'SELECT pg_reload_conf()' >/dev/null
}

standby_of() { # server primary: a fresh standby of primary
	local s=$1 p=$2
	up "$s" && pgctl "$s" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$(sdir "$s")"
	mkdir -p "$(sdir "$s")" && chown postgres:postgres "$(sdir "$s")"
	as_pg "$bin/pg_basebackup" -h 127.0.0.1 -p "$(port "$p")" -U postgres -D "$(sdir "$s")/data" -R -X stream -c fast \
		|| die "pg_basebackup of $p into $s failed"
	launch "$s"
	wait_for 60 "$s streaming from $p" streaming "$p"
}

start() {
	local mode=${1:-sync} p
	sync_names "$mode" >/dev/null
	if p=$(primary) && is_standby "$(other "$p")" && streaming "$p"; then
		[ "$(mode_of "$p")" = "$mode" ] || set_sync "$p" "$mode"
		say "already running (primary $(port "$p"), $mode)"
	else
		stop_all
		rm -rf "$dir"
		mkdir -p "$(sdir a)" && chown -R postgres:postgres "$dir"
		say "making a primary on $(port a)"
		as_pg "$bin/initdb" -A trust -U postgres -D "$(sdir a)/data" >"$dir/initdb.log" 2>&1 || die "initdb failed (see $dir/initdb.log)"
		cat >>"$(sdir a)/data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
wal_level = replica
max_wal_senders = 10
max_connections = 200
hot_standby = on
wal_keep_size = 256MB
EOF
		launch a
		sql a 'CREATE DATABASE test' >/dev/null || die "could not create the test database"
		say "making a standby on $(port b) ($mode)"
		standby_of b a
		set_sync a "$mode"
	fi
	url
}

failover() {
	local p s
	p=$(primary) || die "no primary is running"
	s=$(other "$p")
	is_standby "$s" || die "no standby to promote"
	pgctl "$p" -m immediate stop >/dev/null
	pgctl "$s" -w promote >/dev/null || die "could not promote $s"
	wait_for 30 "$s promoted" is_primary "$s"
	# Alone, a primary that waits for a synchronous standby never commits.
	[ "$(mode_of "$s")" = async ] || set_sync "$s" async
	say "primary is now $(port "$s")"
}

rejoin() {
	local mode=${1:-sync} p
	sync_names "$mode" >/dev/null
	p=$(primary) || die "no primary is running"
	standby_of "$(other "$p")" "$p"
	set_sync "$p" "$mode"
	say "$(port "$(other "$p")") is a standby of $(port "$p") ($mode)"
}

stop_all() {
	local s
	for s in "${servers[@]}"; do up "$s" && pgctl "$s" -m fast -w stop >/dev/null 2>&1 || true; done
}

status() {
	local s role
	for s in "${servers[@]}"; do
		if is_primary "$s"; then role="primary $(mode_of "$s")"; elif is_standby "$s"; then role=standby; else role=down; fi
		printf '%s port %d %s\n' "$s" "$(port "$s")" "$role"
	done
}

url() { echo "postgres://postgres@127.0.0.1:$(port a),127.0.0.1:$(port b)/test?sslmode=disable&target_session_attrs=read-write"; }

case ${1:-} in
start) start "${2:-sync}" ;;
failover) failover ;;
rejoin) rejoin "${2:-sync}" ;;
stop) stop_all ;;
status) status ;;
url) url ;;
destroy) stop_all; rm -rf "$dir" ;;
*) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
