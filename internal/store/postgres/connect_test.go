package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/postgres"
)

func TestMapErr_ReadOnlyIsUnavailable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		want error
	}{
		{"25006", store.ErrUnavailable}, // read_only_sql_transaction: a standby, an old primary
		{"57P01", store.ErrUnavailable},
		{"55P03", store.ErrUnavailable},
		{"23505", store.ErrConflict},
		{"42P01", nil},
	} {
		err := postgres.MapErr(&pgconn.PgError{Code: tc.code})
		for _, sentinel := range []error{store.ErrUnavailable, store.ErrConflict} {
			if got, want := errors.Is(err, sentinel), sentinel == tc.want; got != want {
				t.Errorf("errors.Is(mapErr(%s), %v) = %v, want %v", tc.code, sentinel, got, want)
			}
		}
	}
}

// TestOpen_RefusesReadOnlyServer: a connection to a server that takes no
// writes (here a database whose sessions are read-only, as a standby's
// are) is refused, with and without lock_timeout in the URL (which decides
// whether rowq runs a statement at connect), and nothing runs on it.
func TestOpen_RefusesReadOnlyServer(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, "postgres")
	name := url[strings.LastIndexByte(url, '/')+1:]
	name, _, _ = strings.Cut(name, "?")
	admin := dbtest.OpenURL(t, url).(*postgres.Store)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := postgres.Pool(admin).Exec(ctx, "ALTER DATABASE "+name+" SET default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for _, u := range []string{url, url + sep + "lock_timeout=5000"} {
		s, err := postgres.Open(u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Now(ctx); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("Now on a read-only server: %v, want ErrUnavailable saying read-only", err)
		}
		if _, err := s.NodeSessionOpen(ctx, "n1"); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("NodeSessionOpen on a read-only server: %v, want ErrUnavailable", err)
		}
		s.Close()
	}
}

// TestReadOnlyError_ClosesConnection: a statement answered 25006 closes
// its connection, so that the pool does not hand it out again.
func TestReadOnlyError_ClosesConnection(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	c, err := postgres.Pool(s).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if _, err := c.Exec(ctx, "SET SESSION default_transaction_read_only = on"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, "CREATE TABLE t_read_only (id int)")
	if !errors.Is(postgres.MapErr(err), store.ErrUnavailable) {
		t.Fatalf("write on a read-only session: %v, want ErrUnavailable", err)
	}
	if !c.Conn().IsClosed() {
		t.Error("the connection that got 25006 is still open")
	}
}
