package mysql

import (
	"context"
	"crypto/rand"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/rowq/rowq/internal/store/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrate applies the embedded migrations, one DDL statement per file,
// serialised across nodes by a lock: a named lock of the server, or on
// Galera, whose named locks are member-local, a lease row
// (lockMigrationsGalera). On Galera a DDL statement that fails the way a
// concurrent twin's success makes it fail counts as applied (twinApplied).
func (s *Store) Migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	info, err := s.server(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", mapErr(err))
	}
	r := &migrate.Runner{
		DB:            s.db,
		FS:            sub,
		Lock:          lockMigrations,
		Transactional: false,
		Placeholder:   func(int) string { return "?" },
	}
	if info.galera {
		r.Lock = s.lockMigrationsGalera
		r.Applied = twinApplied
	}
	return mapErr(r.Run(ctx))
}

// migrateLockWait bounds how long a node waits for another's migrations.
const migrateLockWait = 60 * time.Second

// lockMigrations takes a named lock for the database (names are global to
// the server, so the database's name is part of it; at most 64 characters),
// and gives conn the server's own row lock wait until it unlocks instead of
// store.LockWait: a migration that changes rows (0700) may wait for the
// grabs of nodes still running.
func lockMigrations(ctx context.Context, conn *sql.Conn) (func(), error) {
	const name = "LEFT(CONCAT('rowq_migrate:', DATABASE()), 64)"
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "/* rowq:migrate.lock */ SELECT GET_LOCK("+name+", ?)", int(migrateLockWait/time.Second)).Scan(&got); err != nil {
		return nil, err
	}
	if got.Int64 != 1 {
		return nil, fmt.Errorf("another node held the migration lock for %s", migrateLockWait)
	}
	unlock := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		conn.ExecContext(ctx, "/* rowq:migrate.unlock */ DO RELEASE_LOCK("+name+")")
	}
	restore, err := setSession(ctx, conn, "innodb_lock_wait_timeout", "@@GLOBAL.innodb_lock_wait_timeout")
	if err != nil {
		unlock()
		return nil, err
	}
	return func() {
		unlock()
		restore()
	}, nil
}

// setSession sets the session variable name of conn to the SQL expression
// value and returns the function that sets it back; if that fails, the
// connection is discarded rather than returned to the pool so changed.
func setSession(ctx context.Context, conn *sql.Conn, name, value string) (func(), error) {
	var was any
	if err := conn.QueryRowContext(ctx, "/* rowq:migrate.lock */ SELECT @@SESSION."+name).Scan(&was); err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "/* rowq:migrate.lock */ SET SESSION "+name+" = "+value); err != nil {
		return nil, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(ctx, "/* rowq:migrate.unlock */ SET SESSION "+name+" = ?", was); err != nil {
			discard(conn)
		}
	}, nil
}

// The migration lease on Galera: one row of rowq_migrate_lease, which a
// migrator takes when it is free or expired and renews while it migrates.
// Two members taking it at once write the same row; certification lets one
// commit and fails the other (1213), which then finds it held.
const (
	migrateLeaseTTL   = 30 * time.Second
	migrateLeaseRenew = migrateLeaseTTL / 3
	migrateLeasePoll  = 200 * time.Millisecond

	migrateLeaseTableSQL = `/* rowq:migrate.lease */ CREATE TABLE IF NOT EXISTS rowq_migrate_lease (
		name VARCHAR(32) NOT NULL PRIMARY KEY,
		holder VARCHAR(64) NOT NULL,
		expires_at DATETIME(6) NOT NULL)`
	// Assignments run left to right: expires_at moves only when holder is
	// (now) the caller. Arguments: holder, TTL in microseconds.
	migrateLeaseTakeSQL = `/* rowq:migrate.lease */ INSERT INTO rowq_migrate_lease (name, holder, expires_at)
		VALUES ('migrate', ?, NOW(6) + INTERVAL ? MICROSECOND)
		ON DUPLICATE KEY UPDATE
			holder = IF(expires_at < NOW(6) OR holder = VALUES(holder), VALUES(holder), holder),
			expires_at = IF(holder = VALUES(holder), VALUES(expires_at), expires_at)`
	migrateLeaseHeldSQL   = `/* rowq:migrate.lease */ SELECT holder = ? FROM rowq_migrate_lease WHERE name = 'migrate'`
	migrateLeaseReturnSQL = `/* rowq:migrate.unlock */ DELETE FROM rowq_migrate_lease WHERE name = 'migrate' AND holder = ?`
)

// lockMigrationsGalera takes the migration lease, waiting up to
// migrateLockWait for another migrator's, and renews it on conn until
// unlocked, through another connection of the pool (conn is busy with
// the migrations); a migrator that died leaves it to expire after migrateLeaseTTL.
// Every statement of conn meanwhile reads and writes only once its member
// has applied the cluster's earlier commits (wsrep_sync_wait 7), so that
// the lease and the migrations another member recorded are seen. It also
// raises conn's row lock wait as lockMigrations does.
func (s *Store) lockMigrationsGalera(ctx context.Context, conn *sql.Conn) (func(), error) {
	restoreWait, err := setSession(ctx, conn, "wsrep_sync_wait", "7")
	if err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, migrateLeaseTableSQL); err != nil && !twinApplied(err) {
		restoreWait()
		return nil, err
	}
	var b [8]byte
	rand.Read(b[:])
	holder := hex.EncodeToString(b[:])
	if err := takeMigrateLease(ctx, conn, holder); err != nil {
		restoreWait()
		return nil, err
	}
	restoreTimeout, err := setSession(ctx, conn, "innodb_lock_wait_timeout", "@@GLOBAL.innodb_lock_wait_timeout")
	if err != nil {
		returnMigrateLease(ctx, conn, holder)
		restoreWait()
		return nil, err
	}
	renewCtx, stopRenew := context.WithCancel(context.WithoutCancel(ctx))
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		renewMigrateLease(renewCtx, s.db, holder)
	}()
	return func() {
		stopRenew()
		<-renewed
		returnMigrateLease(ctx, conn, holder)
		restoreTimeout()
		restoreWait()
	}, nil
}

// takeMigrateLease takes the lease for holder, polling while another
// holds it, for up to migrateLockWait.
func takeMigrateLease(ctx context.Context, conn *sql.Conn, holder string) error {
	deadline := time.Now().Add(migrateLockWait)
	for {
		_, err := conn.ExecContext(ctx, migrateLeaseTakeSQL, holder, migrateLeaseTTL.Microseconds())
		if err != nil && !retryable(err) {
			return err
		}
		var mine bool
		if err == nil {
			// No row: its holder returned it since; take it next turn.
			err := conn.QueryRowContext(ctx, migrateLeaseHeldSQL, holder).Scan(&mine)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if mine {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("another node held the migration lease for %s", migrateLockWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(migrateLeasePoll):
		}
	}
}

// renewMigrateLease moves the lease's expiry every migrateLeaseRenew until
// ctx ends. A failed renewal is not fatal: the lease may outlive the
// migrations, and if it does not, the next migrator's twin statements
// count as applied (twinApplied).
func renewMigrateLease(ctx context.Context, db *sql.DB, holder string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(migrateLeaseRenew):
		}
		db.ExecContext(ctx, `/* rowq:migrate.lease */ UPDATE rowq_migrate_lease
			SET expires_at = NOW(6) + INTERVAL ? MICROSECOND WHERE name = 'migrate' AND holder = ?`,
			migrateLeaseTTL.Microseconds(), holder)
	}
}

// returnMigrateLease deletes the lease if holder still holds it.
func returnMigrateLease(ctx context.Context, conn *sql.Conn, holder string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	conn.ExecContext(ctx, migrateLeaseReturnSQL, holder)
}

// Errors of a DDL statement whose twin, run by another migrator, succeeded
// first (twinApplied).
var twinErrors = map[uint16]bool{
	1050: true, // ER_TABLE_EXISTS_ERROR
	1060: true, // ER_DUP_FIELDNAME
	1061: true, // ER_DUP_KEYNAME
	1091: true, // ER_CANT_DROP_FIELD_OR_KEY
	1062: true, // ER_DUP_ENTRY: the twin recorded the version first
}

// twinApplied reports an error that a concurrent twin's success would
// cause: the statement counts as applied.
func twinApplied(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && twinErrors[me.Number]
}
