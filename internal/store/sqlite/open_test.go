package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/rowq/rowq/internal/store/sqlite"
)

// TestOpen_WaitsForAnotherWriter: another process holds the new database
// file's write lock (as a concurrent `rowq migrate` does) while the store
// connects. Connecting switches the file to WAL, which needs that lock: it
// must wait for it (busy_timeout) rather than fail at once with
// SQLITE_BUSY.
func TestOpen_WaitsForAnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rowq.db")
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx := context.Background()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		conn.ExecContext(ctx, "COMMIT")
	}()

	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate while another connection held the write lock for 300 ms: %v", err)
	}
}
