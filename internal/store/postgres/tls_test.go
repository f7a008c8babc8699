package postgres_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testcert"
)

// TestTLS_StoreOnTLSOnlyRole runs a store as a role that the server lets in
// over TLS only (scripts/test.sh makes it): it migrates, enqueues and grabs
// a job, and the server's pg_stat_ssl shows each of the store's
// connections encrypted. The same role without TLS is refused, and a CA
// that did not sign the server's certificate fails the verification.
func TestTLS_StoreOnTLSOnlyRole(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dbURL := dbtest.PostgresTLS(t)
	s := dbtest.OpenURL(t, dbURL)
	ids, err := s.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://127.0.0.1:1/", Payload: json.RawMessage(`{"over":"tls"}`)}})
	if err != nil {
		t.Fatalf("enqueue over TLS: %v", err)
	}
	jobs, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 10, Lease: time.Minute})
	if err != nil || len(jobs) != 1 || jobs[0].ID != ids[0] || string(jobs[0].Payload) != `{"over":"tls"}` {
		t.Fatalf("grab over TLS = %+v, %v; want job %d", jobs, err, ids[0])
	}

	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, dbtest.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var conns, encrypted int
	err = admin.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE s.ssl)
		FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.datname = $1`, strings.TrimPrefix(u.Path, "/")).Scan(&conns, &encrypted)
	if err != nil {
		t.Fatal(err)
	}
	if conns == 0 || encrypted != conns {
		t.Fatalf("the server sees %d connections of the store, %d over TLS; want all of them, at least one", conns, encrypted)
	}
	t.Logf("%d connections of the store, all over TLS", conns)

	with := func(mode, rootCert string) string {
		q := u.Query()
		q.Set("sslmode", mode)
		q.Del("sslrootcert")
		if rootCert != "" {
			q.Set("sslrootcert", rootCert)
		}
		v := *u
		v.RawQuery = q.Encode()
		return v.String()
	}
	otherCA := testcert.NewCA(t, "not the server's CA").WriteFile(t, t.TempDir())
	for _, c := range []struct{ mode, rootCert, want string }{
		{"disable", "", "no encryption"},
		{"verify-ca", otherCA, "certificate"},
	} {
		conn, err := pgx.Connect(ctx, with(c.mode, c.rootCert))
		if err == nil {
			conn.Close(ctx)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("connect with sslmode=%s: %v; want an error with %q", c.mode, err, c.want)
		}
	}
}
