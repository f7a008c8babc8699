package postgres_test

import (
	"context"
	"testing"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/postgres"
	"github.com/rowq/rowq/internal/store/storetest"
)

// TestNodeSession_ConnectionKilled ends the session's backend with
// pg_terminate_backend, as an operator or idle_session_timeout would.
func TestNodeSession_ConnectionKilled(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	storetest.NodeSessionKilled(t, s, func(t *testing.T, sess store.NodeSession) {
		var done bool
		err := postgres.Pool(s).QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", int32(postgres.SessionPID(sess))).Scan(&done)
		if err != nil || !done {
			t.Fatalf("pg_terminate_backend: %v, %v", done, err)
		}
	})
}

// TestNodeSession_ProcessKilled SIGKILLs a process that holds a session.
func TestNodeSession_ProcessKilled(t *testing.T) {
	t.Parallel()
	storetest.NodeSessionProcessKilled(t, "^TestNodeSession_ProcessKilled$",
		func(t testing.TB) string { return dbtest.URL(t, "postgres") }, dbtest.OpenURL)
}

// TestNodesReap_OtherDatabaseLocksDoNotCount checks that a node's lock
// held in another database of the same server does not keep it alive: the
// advisory lock space is per database.
func TestNodesReap_OtherDatabaseLocksDoNotCount(t *testing.T) {
	t.Parallel()
	a, ctx := setup(t)
	b, _ := setup(t)
	sess, err := b.NodeSessionOpen(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := a.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "n1", Host: "h", TTL: 60e9, Session: true}); err != nil {
		t.Fatal(err)
	}
	got, err := a.NodesReap(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "n1" {
		t.Fatalf("NodesReap = %v, want [n1]: its lock is held in another database", got)
	}
}
