#!/usr/bin/env bash
# A three-member MariaDB Galera cluster on loopback, for rowq's HA tests and
# chaos runs (docs/ha.md). It leaves the default server on 3306 alone.
#
#   scripts/galera.sh start          bootstrap the cluster (a fresh one unless all three members are up)
#   scripts/galera.sh stop           shut every member down cleanly
#   scripts/galera.sh kill N         SIGKILL member N (1-3)
#   scripts/galera.sh restart N      start member N again; it rejoins the others
#   scripts/galera.sh status         one line per member
#   scripts/galera.sh url [N]        rowq's database URL: every member, or member N
#   scripts/galera.sh destroy        stop and remove the data
#
# Member N listens on ROWQ_GALERA_PORT+N-1 (default 3311-3313) and talks
# Galera on ROWQ_GALERA_GPORT+10*(N-1) (4567, 4577, 4587; the two ports above
# each are its IST and SST ports). Data lives in ROWQ_GALERA_DIR (default
# /var/tmp/rowq-galera). Set the three variables to run a second cluster beside
# the first. The cluster's data is disposable: `start` on a cluster that is not
# whole throws the data away and bootstraps afresh, so that a test never
# inherits a half-dead cluster from an earlier run.
#
# Failure detection is tightened for tests (a dead member is evicted in about
# 3 s instead of Galera's default 5-15 s); see evs.* below.
set -euo pipefail

base=${ROWQ_GALERA_PORT:-3311}
gbase=${ROWQ_GALERA_GPORT:-4567}
dir=${ROWQ_GALERA_DIR:-/var/tmp/rowq-galera}
members=(1 2 3)

say() { printf '==> galera: %s\n' "$*" >&2; }
die() { printf 'galera: %s\n' "$*" >&2; exit 1; }

port() { echo $((base + $1 - 1)); }
gport() { echo $((gbase + 10 * ($1 - 1))); }
mdir() { echo "$dir/m$1"; }
sock() { echo "$(mdir "$1")/mysqld.sock"; }
pidof_member() { cat "$(mdir "$1")/mysqld.pid" 2>/dev/null || true; }
alive() { local p; p=$(pidof_member "$1"); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
sql() { local n=$1; shift; mariadb --no-defaults -uroot -S "$(sock "$n")" -N -B -e "$*" 2>/dev/null; }
status_var() { sql "$1" "SHOW GLOBAL STATUS LIKE '$2'" | awk '{print $2}'; }
ready() { [ "$(status_var "$1" wsrep_ready)" = ON ] && [ "$(status_var "$1" wsrep_cluster_status)" = Primary ]; }
size() { status_var "$1" wsrep_cluster_size; }

wait_for() { # seconds what command...
	local n=$1 what=$2; shift 2
	for _ in $(seq $((n * 5))); do "$@" && return 0; sleep 0.2; done
	die "$what did not happen within ${n}s (logs in $dir/m*/error.log)"
}

# install installs what a member needs when it is missing: the Galera
# library (galera-4), and rsync with MariaDB's SST script for it
# (wsrep_sst_rsync, in mariadb-server; mariadb-server-core alone has not).
install() {
	if [ ! -e /usr/lib/galera/libgalera_smm.so ] || ! command -v rsync >/dev/null || [ ! -x /usr/bin/wsrep_sst_rsync ]; then
		say "installing galera-4, rsync and mariadb-server"
		local sudo=""
		[ "$(id -u)" = 0 ] || sudo=sudo
		$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq galera-4 rsync mariadb-server >/dev/null \
			|| die "could not install galera-4, rsync and mariadb-server"
	fi
	[ -x /usr/sbin/mariadbd ] || die "MariaDB is not installed (scripts/test.sh installs it)"
}

config() { # N: writes member N's my.cnf
	local n=$1 d g addrs="" m
	d=$(mdir "$n")
	g=$(gport "$n")
	for m in "${members[@]}"; do addrs+="${addrs:+,}127.0.0.1:$(gport "$m")"; done
	mkdir -p "$d/data"
	touch "$d/error.log" # before the chown: the member, as mysql, writes to it
	cat >"$d/my.cnf" <<EOF
[mysqld]
user = mysql
datadir = $d/data
socket = $d/mysqld.sock
pid-file = $d/mysqld.pid
log-error = $d/error.log
port = $(port "$n")
bind-address = 127.0.0.1
skip-name-resolve
max_connections = 500
innodb_buffer_pool_size = 64M
innodb_log_file_size = 32M
innodb_flush_log_at_trx_commit = 2
performance_schema = OFF
binlog_format = ROW
default_storage_engine = InnoDB
innodb_autoinc_lock_mode = 2
wsrep_on = ON
wsrep_provider = /usr/lib/galera/libgalera_smm.so
wsrep_cluster_name = rowq_galera_$base
wsrep_cluster_address = gcomm://$addrs
wsrep_node_name = m$n
wsrep_node_address = 127.0.0.1:$g
wsrep_sst_method = rsync
wsrep_sst_receive_address = 127.0.0.1:$((g + 2))
wsrep_provider_options = "base_port=$g;ist.recv_addr=127.0.0.1:$((g + 1));gcache.size=64M;evs.keepalive_period=PT0.5S;evs.inactive_check_period=PT0.5S;evs.suspect_timeout=PT2S;evs.inactive_timeout=PT3S;evs.install_timeout=PT3S;pc.weight=1"
EOF
	chown -R mysql:mysql "$d"
}

launch() { # N [extra mariadbd flags]
	local n=$1; shift
	config "$n"
	rm -f "$(mdir "$n")/mysqld.pid"
	# setsid: the member outlives the shell that started it (a test's
	# process group) like a real server would.
	setsid /usr/sbin/mariadbd --defaults-file="$(mdir "$n")/my.cnf" "$@" </dev/null >>"$(mdir "$n")/error.log" 2>&1 &
}

shutdown_member() { # N
	local n=$1 p
	alive "$n" || return 0
	p=$(pidof_member "$n")
	kill -TERM "$p" 2>/dev/null || true
	for _ in $(seq 150); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.2; done
	kill -KILL "$p" 2>/dev/null || true
}

whole() { # every member up, ready and in a cluster of three
	local n
	for n in "${members[@]}"; do alive "$n" && ready "$n" && [ "$(size "$n")" = 3 ] || return 1; done
}

start() {
	install
	if whole; then
		say "already running on $(port 1)-$(port 3)"
	else
		local n
		for n in "${members[@]}"; do shutdown_member "$n"; done
		rm -rf "$dir"
		mkdir -p "$dir"
		say "bootstrapping member 1 on $(port 1)"
		config 1
		mariadb-install-db --no-defaults --user=mysql --datadir="$(mdir 1)/data" \
			--auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1 \
			|| die "mariadb-install-db failed (see $dir/install.log)"
		launch 1 --wsrep-new-cluster
		wait_for 60 "member 1 ready" ready 1
		sql 1 "CREATE USER IF NOT EXISTS root@'%' IDENTIFIED BY ''; GRANT ALL ON *.* TO root@'%' WITH GRANT OPTION;
			CREATE DATABASE IF NOT EXISTS test" || die "could not create the test database and user"
		for n in 2 3; do
			say "starting member $n on $(port "$n")"
			launch "$n"
			wait_for 120 "member $n joined" ready "$n"
		done
		wait_for 30 "a cluster of three" whole
	fi
	url
}

# recovered N: the position member N's data reached (uuid:seqno), as
# --wsrep-recover finds it in the InnoDB logs. After a SIGKILL the state file
# says -1; started without it the member would ask for a full copy (SST),
# which with rsync blocks writes on the member it copies from.
recovered() {
	local n=$1 log
	log=$(mdir "$n")/recover.log
	/usr/sbin/mariadbd --defaults-file="$(mdir "$n")/my.cnf" --wsrep-recover --log-error="$log" >/dev/null 2>&1 || true
	sed -n 's/.*WSREP: Recovered position: *\([^ ]*\).*/\1/p' "$log" | tail -1
}

restart() {
	local n=$1 pos
	alive "$n" && { say "member $n is running"; return 0; }
	config "$n"
	pos=$(recovered "$n")
	if [ -n "$pos" ]; then
		launch "$n" --wsrep-start-position="$pos"
	else
		launch "$n"
	fi
	wait_for 120 "member $n rejoined" ready "$n"
}

status() {
	local n
	for n in "${members[@]}"; do
		if alive "$n"; then
			printf 'm%d port %d pid %s ready %s cluster %s state %s\n' "$n" "$(port "$n")" "$(pidof_member "$n")" \
				"$(status_var "$n" wsrep_ready)" "$(size "$n")" "$(status_var "$n" wsrep_local_state_comment)"
		else
			printf 'm%d port %d down\n' "$n" "$(port "$n")"
		fi
	done
}

url() {
	if [ -n "${1:-}" ]; then
		echo "mysql://root@127.0.0.1:$(port "$1")/test"
	else
		echo "mysql://root@127.0.0.1:$(port 1),127.0.0.1:$(port 2),127.0.0.1:$(port 3)/test"
	fi
}

member() { case ${1:-} in 1 | 2 | 3) echo "$1" ;; *) die "name a member: 1, 2 or 3" ;; esac; }

case ${1:-} in
start) start ;;
stop) for n in "${members[@]}"; do shutdown_member "$n"; done ;;
kill) n=$(member "${2:-}"); p=$(pidof_member "$n"); [ -z "$p" ] || kill -KILL "$p" 2>/dev/null || true ;;
restart) restart "$(member "${2:-}")" ;;
status) status ;;
url) url "${2:-}" ;;
destroy) for n in "${members[@]}"; do shutdown_member "$n"; done; rm -rf "$dir" ;;
*) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
