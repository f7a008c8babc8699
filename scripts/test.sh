#!/usr/bin/env bash
# Runs every test of rowq against real MariaDB, PostgreSQL and SQLite.
#
# On a fresh Debian machine it prepares what the tests need: installs
# MariaDB and PostgreSQL with apt-get when missing, starts them when stopped,
# lets the test users in over TCP and creates the `test` databases. It fails
# loudly, never skips, when a database cannot be reached.
#
# It also turns TLS on in PostgreSQL if it is off, adds a role, rowq_tls,
# that pg_hba.conf lets in over TLS only (ROWQ_TEST_POSTGRES_TLS_URL), and
# installs Chromium for the dashboard's browser tests (or set
# ROWQ_TEST_CHROMIUM to a browser binary). Last it starts the HA clusters of
# scripts/galera.sh and scripts/pg-ha.sh (their own ports: 3311-3313,
# 5441-5442) and runs the tests with the tag ha.
#
# Point at other servers with ROWQ_TEST_MYSQL_URL / ROWQ_TEST_POSTGRES_URL /
# ROWQ_TEST_POSTGRES_TLS_URL (then nothing is installed or started). Extra
# arguments go to `go test`.
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
# The dashboard's tests drive a real headless Chromium (internal/browsertest).
if [ -z "${ROWQ_TEST_CHROMIUM:-}" ] && ! command -v chromium >/dev/null; then
  say "installing Chromium"
  apt_install chromium
fi

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
  # The server's binary, not its configuration: a package removed but not
  # purged leaves /etc/postgresql behind.
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
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

# --- PostgreSQL over TLS -----------------------------------------------------
# A role that pg_hba.conf lets in over TLS only, for the test that runs a
# store on a TLS connection (internal/store/postgres). The server's own
# certificate (Debian's snakeoil, self-signed) serves as the CA to verify it
# against. Changes are applied with a reload, never a restart.
if [ -z "${ROWQ_TEST_POSTGRES_TLS_URL:-}" ]; then
  [ -n "${PG_URL:-}" ] || die "ROWQ_TEST_POSTGRES_URL names a server of your own: set ROWQ_TEST_POSTGRES_TLS_URL too (a role that server lets in over TLS only)"
  pg() { psql "$PG_URL" -Atqc "$1"; }
  if [ "$(pg 'SHOW ssl')" != on ]; then
    say "turning TLS on in PostgreSQL with a self-signed certificate (reload)"
    pgconf=$(dirname "$(pg 'SHOW config_file')")
    command -v openssl >/dev/null || apt_install openssl
    $SUDO openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj /CN=localhost \
      -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
      -keyout "$pgconf/rowq-test.key" -out "$pgconf/rowq-test.crt" 2>/dev/null || die "could not make a certificate for PostgreSQL"
    $SUDO chown postgres:postgres "$pgconf/rowq-test.key" "$pgconf/rowq-test.crt"
    $SUDO chmod 600 "$pgconf/rowq-test.key"
    pg "ALTER SYSTEM SET ssl_cert_file = '$pgconf/rowq-test.crt'" && pg "ALTER SYSTEM SET ssl_key_file = '$pgconf/rowq-test.key'" \
      && pg "ALTER SYSTEM SET ssl = on" && pg 'SELECT pg_reload_conf()' >/dev/null || die "could not turn TLS on in PostgreSQL"
    ssl_on() { [ "$(pg 'SHOW ssl')" = on ]; }
    wait_until 10 ssl_on || die "PostgreSQL did not turn TLS on (see its log)"
  fi
  pg_cert=$(pg 'SHOW ssl_cert_file')
  [ -r "$pg_cert" ] || die "cannot read PostgreSQL's certificate $pg_cert"
  if [ "$(pg "SELECT 1 FROM pg_roles WHERE rolname = 'rowq_tls'")" != 1 ]; then
    pg 'CREATE ROLE rowq_tls LOGIN' || die "could not create the PostgreSQL role rowq_tls"
  fi
  psql "$PG_URL" -qc "SET password_encryption = 'scram-sha-256'; ALTER ROLE rowq_tls PASSWORD 'rowq_tls'" \
    || die "could not set the password of the PostgreSQL role rowq_tls"
  pg_hba=$(pg 'SHOW hba_file')
  if ! $SUDO grep -q '^hostnossl all rowq_tls all reject' "$pg_hba"; then
    say "letting the role rowq_tls into PostgreSQL over TLS only (pg_hba.conf, reload)"
    hba_new=$(mktemp)
    { printf '# rowq tests (scripts/test.sh): the role rowq_tls over TLS only\n'
      printf 'hostssl all rowq_tls all scram-sha-256\nhostnossl all rowq_tls all reject\n'
      $SUDO cat "$pg_hba"; } > "$hba_new" || die "could not read $pg_hba"
    $SUDO tee "$pg_hba" < "$hba_new" >/dev/null || die "could not update $pg_hba"
    rm -f "$hba_new"
    [ "$(pg 'SELECT count(*) FROM pg_hba_file_rules WHERE error IS NOT NULL')" = 0 ] || die "$pg_hba has errors"
    pg 'SELECT pg_reload_conf()' >/dev/null || die "could not reload PostgreSQL"
  fi
  export ROWQ_TEST_POSTGRES_TLS_URL="postgres://rowq_tls:rowq_tls@127.0.0.1:5432/test?sslmode=verify-ca&sslrootcert=$pg_cert"
  wait_until 10 psql "$ROWQ_TEST_POSTGRES_TLS_URL" -Atqc 'SELECT 1' \
    || die "PostgreSQL does not let rowq_tls in over TLS ($ROWQ_TEST_POSTGRES_TLS_URL)"
fi

# --- HA clusters --------------------------------------------------------------
# A three-member Galera cluster (installs galera-4 and rsync if missing) and
# a PostgreSQL primary with a synchronous standby, on their own ports, for
# the tests built with the tag ha (docs/ha.md). Each start reuses a cluster
# that is whole and makes a fresh one otherwise.
say "starting the Galera cluster (scripts/galera.sh) and the PostgreSQL pair (scripts/pg-ha.sh)"
scripts/galera.sh start >/dev/null || die "could not start the Galera cluster (scripts/galera.sh)"
scripts/pg-ha.sh start sync >/dev/null || die "could not start the PostgreSQL pair (scripts/pg-ha.sh)"

# The race detector instruments everything but modernc.org/sqlite/lib, SQLite's
# own C translated to Go: a cgo driver's C would not be instrumented either,
# and instrumented it made every SQLite statement about ten times slower. Its
# locks are modernc.org/libc's, which stays instrumented (leaving libc out
# too gave false race reports in encoding/json's cache).
say "go test -race -tags ha ./... (MariaDB, PostgreSQL, SQLite, Galera, PostgreSQL failover)"
exec go test -race -gcflags='modernc.org/sqlite/lib=-race=false' -count=1 -timeout 20m -tags ha "$@" ./...
