package mysql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/store/storetest"
)

// TestNodeSession_ConnectionKilled kills the session's connection with
// KILL from another connection, as a server-side timeout or an operator
// would.
func TestNodeSession_ConnectionKilled(t *testing.T) {
	t.Parallel()
	s := dbtest.Open(t, "mysql").(*mysql.Store)
	storetest.NodeSessionKilled(t, s, func(t *testing.T, sess store.NodeSession) {
		if _, err := s.DB().ExecContext(context.Background(), fmt.Sprintf("KILL %d", mysql.SessionConnID(sess))); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNodeSession_ProcessKilled SIGKILLs a process that holds a session.
func TestNodeSession_ProcessKilled(t *testing.T) {
	t.Parallel()
	storetest.NodeSessionProcessKilled(t, "^TestNodeSession_ProcessKilled$",
		func(t testing.TB) string { return dbtest.URL(t, "mysql") }, dbtest.OpenURL)
}

// TestNodeSession_OutlivesConnMaxLifetime checks that the pool's
// ConnMaxLifetime does not close the session's connection, which is held
// out of the pool: the connection that took the lock still holds it after
// several lifetimes and a busy pool.
func TestNodeSession_OutlivesConnMaxLifetime(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dbtest.Open(t, "mysql").(*mysql.Store)
	s.DB().SetConnMaxLifetime(50 * time.Millisecond)
	sess, err := s.NodeSessionOpen(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	for range 30 {
		if _, err := s.Now(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := sess.Check(ctx); err != nil {
		t.Fatal(err)
	}
	var holder int64
	if err := s.DB().QueryRowContext(ctx, "SELECT IS_USED_LOCK(CONCAT('rowq_node:', SHA1(CONCAT(DATABASE(), ':', 'n1'))))").Scan(&holder); err != nil {
		t.Fatal(err)
	}
	if want := mysql.SessionConnID(sess); holder != want {
		t.Fatalf("lock held by connection %d, want the session's %d", holder, want)
	}
}
