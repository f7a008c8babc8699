package sqlite_test

import (
	"testing"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/sqlite"
	"github.com/rowq/rowq/internal/store/storetest"
)

// TestNodeSession_ConnectionKilled closes the session's lock file under
// it, which frees its flock.
func TestNodeSession_ConnectionKilled(t *testing.T) {
	t.Parallel()
	s := dbtest.Open(t, "sqlite")
	storetest.NodeSessionKilled(t, s, func(t *testing.T, sess store.NodeSession) {
		if err := sqlite.SessionFile(sess).Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestNodeSession_ProcessKilled SIGKILLs a process that holds a session.
func TestNodeSession_ProcessKilled(t *testing.T) {
	t.Parallel()
	storetest.NodeSessionProcessKilled(t, "^TestNodeSession_ProcessKilled$",
		func(t testing.TB) string { return dbtest.URL(t, "sqlite") }, dbtest.OpenURL)
}
