#!/usr/bin/env bash
# Runs every test of rowq against real MariaDB, PostgreSQL and SQLite.
#
# On a fresh Debian machine it prepares what the tests need: installs
# MariaDB and PostgreSQL with apt-get when missing, starts them when stopped,
# lets the test users in over TCP and creates the `test` databases. It fails
# loudly, never skips, when a database cannot be reached.
#
# Point at other servers with ROWQ_TEST_MYSQL_URL / ROWQ_TEST_POSTGRES_URL
# (then nothing is installed or started). Extra arguments go to `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '==> %s\n' "$*"; }
die() { printf 'test setup FAILED: %s\n' "$*" >&2; exit 1; }

SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
apt_updated=""
apt_install() {
  [ -n "$apt_updated" ] || { $SUDO apt-get update -qq || die "apt-get update"; apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null || die "apt-get install $*"
}

wait_until() { # seconds command...
  local n=$1; shift
  for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 1; done
  return 1
}

command -v go >/dev/null || die "Go is not installed (need Go 1.26+)"
# The Fireworq client script (scripts/fireworq-client.sh) runs on curl and jq; the
# Python client's tests (clients/python) on python3, its type check on mypy.
for tool in curl jq python3 mypy; do
  command -v "$tool" >/dev/null || { say "installing $tool"; apt_install "$tool"; }
done

# --- MariaDB -----------------------------------------------------------------
if [ -z "${ROWQ_TEST_MYSQL_URL:-}" ]; then
  mysql_tcp() { mariadb --protocol=tcp -h127.0.0.1 -P3306 -uroot "$@"; }
  if ! command -v mariadbd >/dev/null && [ ! -x /usr/sbin/mariadbd ]; then
    say "installing MariaDB"
    apt_install mariadb-server mariadb-client
  fi
  if ! mysql_tcp -e 'SELECT 1' >/dev/null 2>&1; then
    if ! mariadb-admin ping >/dev/null 2>&1; then
      say "starting MariaDB"
      $SUDO mkdir -p /run/mysqld && $SUDO chown mysql:mysql /run/mysqld 2>/dev/null || true
      $SUDO start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql \
        || die "could not start MariaDB"
      wait_until 60 mariadb-admin ping || die "MariaDB did not come up within 60s"
    fi
    # A fresh install lets root in only over the Unix socket.
    if ! mysql_tcp -e 'SELECT 1' >/dev/null 2>&1; then
      say "letting root in over TCP without a password (test server only)"
      $SUDO mariadb -uroot -e "ALTER USER root@localhost IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket; \
        CREATE USER IF NOT EXISTS root@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO root@'127.0.0.1' WITH GRANT OPTION;" \
        || die "could not configure MariaDB's root user"
    fi
  fi
  mysql_tcp -e 'CREATE DATABASE IF NOT EXISTS test' || die "MariaDB at 127.0.0.1:3306 is not reachable as root"
  export ROWQ_TEST_MYSQL_URL="mysql://root@127.0.0.1:3306/test"
fi

# --- PostgreSQL --------------------------------------------------------------
if [ -z "${ROWQ_TEST_POSTGRES_URL:-}" ]; then
  PG_URL="postgres://postgres:rowq@127.0.0.1:5432/postgres?sslmode=disable"
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    say "installing PostgreSQL"
    apt_install postgresql postgresql-client
  fi
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    say "starting PostgreSQL"
    ver=$(ls /etc/postgresql | sort -V | tail -1)
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$ver" main start || die "could not start PostgreSQL $ver"
    wait_until 60 pg_isready -q -h 127.0.0.1 -p 5432 || die "PostgreSQL did not come up within 60s"
  fi
  # With trust auth any password works; a fresh install wants this one.
  if ! psql "$PG_URL" -Atqc 'SELECT 1' >/dev/null 2>&1; then
    say "giving the postgres role a password (test server only)"
    as_postgres=(runuser -u postgres --)
    [ -z "$SUDO" ] || as_postgres=(sudo -u postgres)
    (cd / && "${as_postgres[@]}" psql -qc "ALTER USER postgres PASSWORD 'rowq'") \
      || die "could not set the postgres role's password"
  fi
  psql "$PG_URL" -Atqc 'SELECT 1' >/dev/null || die "PostgreSQL at 127.0.0.1:5432 is not reachable as postgres"
  if [ "$(psql "$PG_URL" -Atqc "SELECT 1 FROM pg_database WHERE datname = 'test'")" != 1 ]; then
    psql "$PG_URL" -qc 'CREATE DATABASE test' || die "could not create PostgreSQL database test"
  fi
  export ROWQ_TEST_POSTGRES_URL="postgres://postgres:rowq@127.0.0.1:5432/test?sslmode=disable"
fi

say "go test -race ./... (MariaDB, PostgreSQL and SQLite)"
exec go test -race -count=1 -timeout 15m "$@" ./...
