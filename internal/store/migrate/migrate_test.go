package migrate_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"testing/fstest"

	_ "modernc.org/sqlite"

	"github.com/rowq/rowq/internal/store/migrate"
)

func sqliteRunner(t *testing.T, files fstest.MapFS) (*migrate.Runner, *sql.DB) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return &migrate.Runner{DB: db, FS: files, Transactional: true, Placeholder: func(int) string { return "?" }}, db
}

func versions(t *testing.T, db *sql.DB) []int {
	t.Helper()
	rows, err := db.Query("SELECT version FROM rowq_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	return vs
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// Where DDL is transactional, the pending files are applied whole or not
// at all: a failing file leaves none of the others behind.
func TestRun_TransactionalAllOrNone(t *testing.T) {
	ctx := context.Background()
	files := fstest.MapFS{
		"0001_a.up.sql": {Data: []byte("CREATE TABLE a (id INTEGER PRIMARY KEY)")},
		"0002_b.up.sql": {Data: []byte("CREATE TABLE b (id INTEGER PRIMARY KEY")}, // unclosed
	}
	r, db := sqliteRunner(t, files)
	if err := r.Run(ctx); err == nil {
		t.Fatal("Run applied a file that does not parse")
	}
	if tableExists(t, db, "a") || len(versions(t, db)) != 0 {
		t.Fatalf("a failed run left table a (%v) or versions %v", tableExists(t, db, "a"), versions(t, db))
	}

	files["0002_b.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE b (id INTEGER PRIMARY KEY)")}
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := versions(t, db); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("versions %v, want [1 2]", got)
	}

	// Up to date: nothing runs again; a new file is applied alone.
	files["0003_c.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE c (id INTEGER PRIMARY KEY)")}
	if err := r.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := versions(t, db); len(got) != 3 || !tableExists(t, db, "c") {
		t.Fatalf("after a third file: versions %v, table c %v", got, tableExists(t, db, "c"))
	}
	if err := r.Run(ctx); err != nil {
		t.Fatalf("a run with nothing to apply: %v", err)
	}
}

func TestRun_RefusesTwoFilesOfOneVersion(t *testing.T) {
	r, _ := sqliteRunner(t, fstest.MapFS{
		"0001_a.up.sql": {Data: []byte("SELECT 1")},
		"0001_b.up.sql": {Data: []byte("SELECT 1")},
	})
	if err := r.Run(context.Background()); err == nil {
		t.Fatal("Run accepted two files of version 1")
	}
}
