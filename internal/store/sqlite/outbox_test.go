package sqlite_test

import (
	"bufio"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/sqlite"
)

// moverEnv names the database file of the mover that
// TestOutboxMove_AbortedBeforeCommit runs in a child process.
const moverEnv = "ROWQ_TEST_SQLITE_MOVER"

// TestOutboxMove_AbortedBeforeCommit kills (SIGKILL) a process in the
// middle of a move, deterministically: the child process (this test
// binary again) moves 6 outbox rows, and a temporary trigger on its writer
// connection calls, after each job inserted, a function that stops the
// move for good once the transaction has deleted every row and inserted
// every job, and says so. The test checks that the child's transaction
// holds the database's write lock, kills the child, and finds what the
// next mover finds: every row still in the outbox, no job; the next move
// makes each row one job. SQLite's one writer cannot be held back by
// another connection, as MariaDB's and PostgreSQL's tests of the same
// name hold theirs; a process of its own can be stopped inside its move.
func TestOutboxMove_AbortedBeforeCommit(t *testing.T) {
	if path := os.Getenv(moverEnv); path != "" {
		moveAndHang(t, path)
		return
	}
	const rows = 6
	url := dbtest.URL(t, "sqlite")
	path := strings.TrimPrefix(url, "sqlite://")
	s := dbtest.OpenURL(t, url)
	ctx := t.Context()
	in := make([]*store.OutboxRow, rows)
	for i := range in {
		u := fmt.Sprintf("http://a/%d", i)
		in[i] = &store.OutboxRow{Category: "c", URL: &u}
	}
	if err := s.OutboxInsert(ctx, in); err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^TestOutboxMove_AbortedBeforeCommit$")
	child.Env = append(os.Environ(), moverEnv+"="+path)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	said := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "hanging") {
				said <- line
				return
			}
		}
		close(said)
	}()
	select {
	case line, ok := <-said:
		if want := fmt.Sprintf("hanging: outbox %d jobs %d", 0, rows); !ok || line != want {
			t.Fatalf("the mover said %q, want %q", line, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the mover did not reach the end of its move within 30s")
	}
	// The move's transaction is open: it holds the one writer's lock.
	probe, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	if tx, err := probe.BeginTx(ctx, nil); err == nil {
		tx.Rollback()
		t.Fatal("a write transaction began while the move hung: the move's transaction is not open")
	}

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	child.Wait()

	got, err := s.OutboxRead(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != rows {
		t.Fatalf("after the killed move the outbox holds %d rows, want all %d", len(got), rows)
	}
	if jobs := queueJobs(t, s); len(jobs) != 0 {
		t.Fatalf("the killed move left %d jobs, want none", len(jobs))
	}
	m, err := s.OutboxMove(ctx, moveParams(got))
	if err != nil {
		t.Fatal(err)
	}
	if jobs := queueJobs(t, s); len(m.Pushed) != rows || len(jobs) != rows {
		t.Fatalf("the next move made %d jobs (%d in the queue), want %d", len(m.Pushed), len(jobs), rows)
	}
	if left, err := s.OutboxRead(ctx, 10); err != nil || len(left) != 0 {
		t.Fatalf("after the next move the outbox holds %d rows (%v), want none", len(left), err)
	}
}

// moveAndHang is the child of TestOutboxMove_AbortedBeforeCommit: it
// moves the outbox of the database at path, and hangs inside the move
// once it has inserted as many jobs as it read rows, after saying so on
// stdout with what its transaction sees.
func moveAndHang(t *testing.T, path string) {
	err := msqlite.RegisterScalarFunction("rowq_test_hang", 3, func(_ *msqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		outbox, jobs, want := args[0].(int64), args[1].(int64), args[2].(int64)
		if jobs == want {
			fmt.Printf("hanging: outbox %d jobs %d\n", outbox, jobs)
			select {} // until the parent kills this process
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rows, err := s.OutboxRead(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	// The writer pool is one connection, kept open: its temporary
	// trigger fires in the move.
	if _, err := sqlite.Writer(s).ExecContext(ctx, fmt.Sprintf(`CREATE TEMP TRIGGER hang AFTER INSERT ON main.jobs BEGIN
		SELECT rowq_test_hang((SELECT COUNT(*) FROM rowq_outbox), (SELECT COUNT(*) FROM jobs), %d); END`, len(rows))); err != nil {
		t.Fatal(err)
	}
	_, err = s.OutboxMove(ctx, moveParams(rows))
	t.Fatalf("the move returned (%v) instead of hanging", err)
}

// moveParams moves rows to queue "q".
func moveParams(rows []*store.OutboxRow) *store.OutboxMoveParams {
	p := &store.OutboxMoveParams{}
	for _, r := range rows {
		p.Jobs = append(p.Jobs, store.OutboxJob{OutboxID: r.ID, Job: &store.JobInsertParams{Queue: "q", Category: r.Category, URL: *r.URL}})
	}
	return p
}

func queueJobs(t *testing.T, s store.Store) []*store.Job {
	t.Helper()
	jobs, err := s.JobsList(t.Context(), &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}
