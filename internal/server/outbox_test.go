package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// outboxInsert is the INSERT an application writes: category, url and a
// JSON payload (a JSON string, sent raw to the worker).
const outboxInsert = `INSERT INTO rowq_outbox (category, url, payload) VALUES (?, ?, ?)`

// appInsert inserts one outbox row in tx, as an application does.
func appInsert(t *testing.T, tx *sql.Tx, dialect, url, body string) {
	t.Helper()
	if _, err := tx.ExecContext(t.Context(), dbtest.Rebind(dialect, outboxInsert), "cat", url, `"`+body+`"`); err != nil {
		t.Fatal(err)
	}
}

func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return tx
}

func commit(t *testing.T, tx *sql.Tx) {
	t.Helper()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// outboxNode starts a node with queue q, routed from category cat, and a
// worker that succeeds.
func outboxNode(t *testing.T, dbURL string) (*server.Server, *testworker.Worker) {
	t.Helper()
	w := testworker.New(t, func(string, int) (int, string, time.Duration) { return 200, `{"status":"success"}`, 0 })
	s := startNode(t, dbURL, nil)
	setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 20, "polling_interval": 200})
	testworker.WaitFor(t, 10*time.Second, "the node moves the outbox", s.MovesOutbox)
	return s, w
}

// TestOutbox_CommitDeliversRollbackDoesNot writes outbox rows as an
// application does: a committed row becomes one job, delivered once; a
// rolled-back one never becomes a job. On MySQL/MariaDB and PostgreSQL a
// row whose transaction is still open is not moved, while rows committed
// after it (with higher ids) are; it is moved once its transaction
// commits. (SQLite has one writer: a second transaction cannot commit
// while the first is open.)
func TestOutbox_CommitDeliversRollbackDoesNot(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		url := dbtest.URL(t, dialect)
		s, w := outboxNode(t, url)
		app := dbtest.AppDB(t, url, 2)

		tx := begin(t, app)
		appInsert(t, tx, dialect, w.URL, "rolled-back")
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if dialect != "sqlite" {
			open := begin(t, app)
			appInsert(t, open, dialect, w.URL, "late")
			tx := begin(t, app)
			appInsert(t, tx, dialect, w.URL, "committed")
			commit(t, tx)
			testworker.WaitFor(t, 10*time.Second, "the committed row's delivery", func() bool { return w.Count("committed") == 1 })
			time.Sleep(300 * time.Millisecond) // many probes
			if n := w.Count("late"); n != 0 {
				t.Fatalf("a row of an open transaction was delivered %d times", n)
			}
			commit(t, open)
		} else {
			tx := begin(t, app)
			appInsert(t, tx, dialect, w.URL, "committed")
			appInsert(t, tx, dialect, w.URL, "late")
			commit(t, tx)
		}
		testworker.WaitFor(t, 10*time.Second, "the late row's delivery", func() bool { return w.Count("late") == 1 })
		time.Sleep(500 * time.Millisecond)
		if c, l, r := w.Count("committed"), w.Count("late"), w.Count("rolled-back"); c != 1 || l != 1 || r != 0 {
			t.Fatalf("deliveries: committed %d, late %d, rolled-back %d; want 1, 1, 0", c, l, r)
		}
		if rows := mustOutboxEmpty(t, s); rows != 0 {
			t.Fatalf("outbox holds %d rows after the moves, want 0", rows)
		}
	})
}

func mustOutboxEmpty(t *testing.T, s *server.Server) int {
	t.Helper()
	rows, err := s.Store().OutboxRead(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

// TestOutbox_ConcurrentInserters has concurrent transactions write rows
// (1 to 3 each; every fifth transaction rolls back): every committed row
// is delivered exactly once, and no rolled-back one.
func TestOutbox_ConcurrentInserters(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		url := dbtest.URL(t, dialect)
		_, w := outboxNode(t, url)
		const inserters, txs = 8, 25
		app := dbtest.AppDB(t, url, inserters)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			want = map[string]bool{}
			lost = map[string]bool{}
		)
		for g := range inserters {
			wg.Go(func() {
				for i := range txs {
					tx, err := app.BeginTx(t.Context(), nil)
					if err != nil {
						t.Error(err)
						return
					}
					var bodies []string
					for k := range 1 + (g+i)%3 {
						body := fmt.Sprintf("g%d-t%d-r%d", g, i, k)
						if _, err := tx.ExecContext(t.Context(), dbtest.Rebind(dialect, outboxInsert), "cat", w.URL, `"`+body+`"`); err != nil {
							t.Error(err)
							tx.Rollback()
							return
						}
						bodies = append(bodies, body)
					}
					rollback := i%5 == 4
					if rollback {
						err = tx.Rollback()
					} else {
						err = tx.Commit()
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					for _, b := range bodies {
						if rollback {
							lost[b] = true
						} else {
							want[b] = true
						}
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		testworker.WaitFor(t, 60*time.Second, fmt.Sprintf("%d deliveries", len(want)), func() bool { return w.Distinct() >= len(want) })
		time.Sleep(500 * time.Millisecond) // room for a duplicate to show
		for b := range want {
			if n := w.Count(b); n != 1 {
				t.Errorf("row %s delivered %d times, want 1", b, n)
			}
		}
		for b := range lost {
			if n := w.Count(b); n != 0 {
				t.Errorf("rolled-back row %s delivered %d times", b, n)
			}
		}
		if got := w.Distinct(); got != len(want) {
			t.Errorf("%d distinct deliveries, want %d", got, len(want))
		}
	})
}

// TestOutbox_BadRowsAreRejected writes rows that are not valid jobs: each
// goes to the rejects with a reason naming its column (GET
// /outbox/rejects, counted by /metrics), and the valid row beside them is
// delivered.
func TestOutbox_BadRowsAreRejected(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		url := dbtest.URL(t, dialect)
		s, w := outboxNode(t, url)
		app := dbtest.AppDB(t, url, 1)
		insert := `INSERT INTO rowq_outbox (category, url, payload, max_retries, retry_delay, priority, unique_key) VALUES (?, ?, ?, ?, ?, ?, ?)`
		rows := []struct {
			category, url, payload any
			maxRetries, retryDelay any
			priority, uniqueKey    any
			reason                 string // "" for the valid row
		}{
			{"cat", nil, nil, nil, nil, nil, nil, "url: required"},
			{"bad category", w.URL, nil, nil, nil, nil, nil, "category: "},
			{"unrouted", w.URL, nil, nil, nil, nil, nil, "category: no routing for category \"unrouted\""},
			{"cat", w.URL, "not json", nil, nil, nil, nil, "payload: must be a JSON value"},
			{"cat", w.URL, nil, -1, nil, nil, nil, "max_retries: must be 0..1000000, got -1"},
			{"cat", w.URL, nil, nil, 99999999, nil, nil, "retry_delay: must be 0..2592000"},
			{"cat", w.URL, nil, nil, nil, 5000, nil, "priority: must be -1000..1000"},
			{"cat", w.URL, nil, nil, nil, nil, "ends with a space ", "unique_key: must not end with a space"},
			{"cat", "ftp://example.com/", nil, nil, nil, nil, nil, "url: scheme must be http or https"},
			{"cat", w.URL, `"valid"`, 2, 1, 10, "key-1", ""},
		}
		tx := begin(t, app)
		for _, r := range rows {
			if _, err := tx.ExecContext(t.Context(), dbtest.Rebind(dialect, insert), r.category, r.url, r.payload,
				r.maxRetries, r.retryDelay, r.priority, r.uniqueKey); err != nil {
				t.Fatal(err)
			}
		}
		commit(t, tx)
		testworker.WaitFor(t, 10*time.Second, "the valid row's delivery", func() bool { return w.Count("valid") == 1 })
		var page struct {
			Rejects []struct {
				OutboxID int64   `json:"outbox_id"`
				Category string  `json:"category"`
				Payload  *string `json:"payload"`
				Reason   string  `json:"reason"`
			} `json:"rejects"`
		}
		testworker.WaitFor(t, 10*time.Second, "9 rejects", func() bool {
			getJSON(t, s, "/outbox/rejects", &page)
			return len(page.Rejects) == 9
		})
		for i, r := range page.Rejects {
			if !strings.HasPrefix(r.Reason, rows[i].reason) || r.Category != rows[i].category {
				t.Errorf("reject %d = %+v, want category %v and a reason starting %q", i, r, rows[i].category, rows[i].reason)
			}
		}
		if p := page.Rejects[3].Payload; p == nil || *p != "not json" {
			t.Errorf("reject of the bad payload keeps %v, want the row's text", p)
		}
		if !strings.Contains(getText(t, s, "/metrics"), "rowq_outbox_rejects 9") {
			t.Errorf("/metrics does not count the 9 rejects")
		}
		if page := getText(t, s, "/ui/outbox"); !strings.Contains(page, "max_retries: must be 0..1000000, got -1") ||
			!strings.Contains(page, "not json") || !strings.Contains(page, "9 in all") {
			t.Errorf("the dashboard's outbox page does not show the rejects:\n%s", page)
		}
		if n := mustOutboxEmpty(t, s); n != 0 {
			t.Fatalf("outbox holds %d rows, want 0", n)
		}
	})
}

func getJSON(t *testing.T, s *server.Server, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s = %d", path, resp.StatusCode)
	}
	if err := jsonDecode(resp.Body, v); err != nil {
		t.Fatal(err)
	}
}

func getText(t *testing.T, s *server.Server, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOutbox_RestrictedUser writes to the outbox as a database user that
// may only INSERT into rowq_outbox, with the GRANT docs/outbox.md gives:
// its rows are delivered, and it can read nothing. SQLite has no users:
// whoever can write the file can write every table.
func TestOutbox_RestrictedUser(t *testing.T) {
	for _, dialect := range []string{"mysql", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			url := dbtest.URL(t, dialect)
			_, w := outboxNode(t, url)
			admin := dbtest.AppDB(t, url, 1)
			ctx := t.Context()
			user := fmt.Sprintf("rowq_app_%d", time.Now().UnixNano()%1_000_000_000)
			exec := func(q string) {
				t.Helper()
				if _, err := admin.ExecContext(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			switch dialect {
			case "mysql":
				exec("CREATE USER '" + user + "'@'%' IDENTIFIED BY 'secret'")
				t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP USER '"+user+"'@'%'") })
				exec("GRANT INSERT ON rowq_outbox TO '" + user + "'@'%'")
			case "postgres":
				exec("CREATE ROLE " + user + " LOGIN PASSWORD 'secret'")
				t.Cleanup(func() {
					admin.ExecContext(context.Background(), "REVOKE ALL ON rowq_outbox FROM "+user)
					admin.ExecContext(context.Background(), "DROP ROLE "+user)
				})
				exec("GRANT INSERT ON rowq_outbox TO " + user)
			}
			app := dbtest.AppDB(t, dbtest.WithUser(t, url, user, "secret"), 1)
			tx := begin(t, app)
			appInsert(t, tx, dialect, w.URL, "restricted")
			commit(t, tx)
			testworker.WaitFor(t, 10*time.Second, "the restricted user's row delivered", func() bool { return w.Count("restricted") == 1 })
			var n int
			if err := app.QueryRowContext(ctx, "SELECT COUNT(*) FROM rowq_outbox").Scan(&n); err == nil {
				t.Fatalf("the restricted user could read rowq_outbox: the test's user is not restricted")
			}
			if _, err := app.ExecContext(ctx, dbtest.Rebind(dialect, "INSERT INTO jobs (queue_name) VALUES (?)"), "q"); err == nil {
				t.Fatalf("the restricted user could write jobs")
			}
		})
	}
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// TestOutbox_KeyedRows: an outbox row takes a concurrency key, limit and
// ordering as POST /job does. The rows of an ordered key, written in one
// transaction, are delivered one at a time in their order, the first's
// failed try holding the others back; a keyed row routed to a pull queue,
// a limit of 0 and a limit without a key are rejected, naming the column.
func TestOutbox_KeyedRows(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			if body == "o1" && attempt == 1 {
				return 500, `{"status":"failure"}`, 0
			}
			return 200, `{"status":"success"}`, 20 * time.Millisecond
		})
		url := dbtest.URL(t, dialect)
		s := startNode(t, url, nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 20, "polling_interval": 200})
		setupQueue(t, s, "p", "pulled", map[string]any{"delivery": "pull"})
		testworker.WaitFor(t, 10*time.Second, "the node moves the outbox", s.MovesOutbox)
		app := dbtest.AppDB(t, url, 1)
		insert := dbtest.Rebind(dialect, `INSERT INTO rowq_outbox (category, url, payload, max_retries, retry_delay,
			concurrency_key, concurrency_limit, ordered) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`)
		rows := []struct {
			category, payload string
			key, limit        any
			ordered           any
			reason            string // "" for a valid row
		}{
			{"cat", `"o1"`, "order:7", nil, true, ""},
			{"cat", `"o2"`, "order:7", nil, true, ""},
			{"cat", `"o3"`, "order:7", 1, true, ""},
			{"pulled", `"p"`, "order:7", nil, nil, "concurrency_key: not on queue \"p\", which delivers by pull"},
			{"cat", `"zero"`, "k", 0, nil, "concurrency_limit: must be 1..10000, got 0"},
			{"cat", `"nokey"`, nil, 2, nil, "concurrency_limit: only with concurrency_key"},
		}
		tx := begin(t, app)
		for _, r := range rows {
			if _, err := tx.ExecContext(t.Context(), insert, r.category, w.URL, r.payload, 3, 1, r.key, r.limit, r.ordered); err != nil {
				t.Fatal(err)
			}
		}
		commit(t, tx)
		testworker.WaitFor(t, 20*time.Second, "the ordered rows' deliveries", func() bool { return w.Count("o3") == 1 })
		if got, want := strings.Join(w.Arrivals(), " "), "o1 o1 o2 o3"; got != want {
			t.Errorf("deliveries in the order %s, want %s (o1 failed once, holding o2 and o3 back)", got, want)
		}
		var page struct {
			Rejects []struct {
				Reason         string  `json:"reason"`
				ConcurrencyKey *string `json:"concurrency_key"`
			} `json:"rejects"`
		}
		testworker.WaitFor(t, 10*time.Second, "3 rejects", func() bool {
			getJSON(t, s, "/outbox/rejects", &page)
			return len(page.Rejects) == 3
		})
		for i, r := range page.Rejects {
			if want := rows[3+i].reason; !strings.HasPrefix(r.Reason, want) {
				t.Errorf("reject %d: reason %q, want it to start %q", i, r.Reason, want)
			}
		}
		if k := page.Rejects[0].ConcurrencyKey; k == nil || *k != "order:7" {
			t.Errorf("the pull row's reject keeps concurrency_key %v, want order:7", k)
		}
	})
}
