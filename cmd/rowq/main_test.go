package main_test

// Process-level end-to-end tests: they build the real rowq binary once and
// run it as separate OS processes, configured through ROWQ_* variables, to
// check what only a process can show: the zero-flag start, exit codes,
// signals (soft and hard shutdown) and kill -9 (the failure model's "no
// accepted job is lost").

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/backend"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// rowqBin is the binary under test, built by TestMain.
var rowqBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "rowq-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	rowqBin = filepath.Join(dir, "rowq")
	goCmd := "go"
	if root := os.Getenv("GOROOT"); root != "" {
		goCmd = filepath.Join(root, "bin", "go")
	}
	build := exec.Command(goCmd, "build", "-o", rowqBin, "github.com/rowq/rowq/cmd/rowq")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build rowq:", err)
		return 1
	}
	return m.Run()
}

// testEnv is the configuration of a test node on dbURL: fast heartbeats,
// leases and rescues, and no default queue unless extra sets one. Later
// entries win, so extra overrides these.
func testEnv(dbURL string, extra ...string) []string {
	return append([]string{
		"ROWQ_DATABASE_URL=" + dbURL,
		"ROWQ_QUEUE_DEFAULT=",
		"ROWQ_CONFIG_REFRESH_INTERVAL=100ms",
		"ROWQ_NODE_TTL=1s",
		"ROWQ_GRAB_LEASE=2s",
		"ROWQ_RESCUE_INTERVAL=200ms",
		"ROWQ_SHUTDOWN_TIMEOUT=10s",
	}, extra...)
}

// baseEnv is the test's environment without any ROWQ_ or FIREWORQ_
// variable, so that a process sees only the configuration its test gives.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ROWQ_") && !strings.HasPrefix(kv, "FIREWORQ_") {
			env = append(env, kv)
		}
	}
	return env
}

// syncBuffer collects a process's output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// proc is a running rowq process.
type proc struct {
	name     string
	cmd      *exec.Cmd
	addr     string // API address (serve only)
	out      *syncBuffer
	done     chan struct{} // closed once the process has exited
	exitedAt time.Time     // set before done is closed
}

// start runs rowq with args in dir, with env added to baseEnv. The process
// is killed when the test ends, if it still runs; its output is logged if
// the test failed or ROWQ_TEST_LOG is set.
func start(t *testing.T, name, dir string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(rowqBin, args...)
	cmd.Dir = dir
	cmd.Env = append(baseEnv(), env...)
	p := &proc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		cmd.Wait()
		p.exitedAt = time.Now()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() || os.Getenv("ROWQ_TEST_LOG") != "" {
			t.Logf("output of %s (pid %d):\n%s", name, cmd.Process.Pid, p.out)
		}
	})
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns its exit code (-1 if a
// signal killed it).
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.name, timeout)
		return 0
	}
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s: %v", p.name, err)
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	addrsMu.Lock()
	defer addrsMu.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		// The kernel may hand a port just closed to the next caller: two
		// nodes started at once would then share it, and the health check
		// of the one that failed to bind would reach the other.
		if !addrsGiven[addr] {
			addrsGiven[addr] = true
			return addr
		}
	}
}

// addrsGiven holds every address freeAddr has handed out in this process.
var (
	addrsMu    sync.Mutex
	addrsGiven = map[string]bool{}
)

// serve runs `rowq serve` in dir with env (and ROWQ_BIND on a free port)
// and waits until GET /healthz answers 200. A port taken in the meantime
// by another process is retried on a new one.
func serve(t *testing.T, dir string, env ...string) *proc {
	t.Helper()
	name := "rowq serve"
	for _, kv := range env {
		if id, ok := strings.CutPrefix(kv, "ROWQ_NODE_ID="); ok {
			name += " " + id
		}
	}
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		p := start(t, name, dir, append([]string{"ROWQ_BIND=" + addr}, env...), "serve")
		p.addr = addr
		deadline := time.Now().Add(30 * time.Second)
		for {
			if code, _, err := p.do("GET", "/healthz", nil); err == nil && code == http.StatusOK {
				return p
			}
			if p.exited() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: GET /healthz did not answer 200 within 30s", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !strings.Contains(p.out.String(), "address already in use") || attempt == 3 {
			t.Fatalf("%s exited with code %d before it was healthy", name, p.cmd.ProcessState.ExitCode())
		}
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// do sends a JSON request to the process's API and decodes the JSON answer.
func (p *proc) do(method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+p.addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: answer is not a JSON object: %q", method, path, raw)
	}
	return resp.StatusCode, out, nil
}

func (p *proc) mustCall(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	code, out, err := p.do(method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("%s %s = %d %v, want 200", method, path, code, out)
	}
	return out
}

// push enqueues a job and returns its id. It may run outside the test's
// goroutine, so it reports instead of stopping the test.
func (p *proc) push(category string, job map[string]any) (int64, error) {
	code, out, err := p.do("POST", "/job/"+category, job)
	if err != nil {
		return 0, err
	}
	id, ok := out["id"].(float64)
	if code != http.StatusOK || !ok || id <= 0 {
		return 0, fmt.Errorf("POST /job/%s = %d %v, want 200 with an id", category, code, out)
	}
	return int64(id), nil
}

func (p *proc) mustPush(t *testing.T, category string, job map[string]any) int64 {
	t.Helper()
	id, err := p.push(category, job)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// leader answers GET /queue/{q}/node's id, or "" while the queue has none.
func (p *proc) leader(t *testing.T, q string) string {
	t.Helper()
	code, out, err := p.do("GET", "/queue/"+q+"/node", nil)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		return ""
	}
	id, _ := out["id"].(string)
	return id
}

func jobGone(t *testing.T, st store.Store, queue string, id int64) bool {
	t.Helper()
	_, err := st.JobGet(context.Background(), queue, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get job %d: %v", id, err)
	}
	return err != nil
}

func TestServe_NoFlagsUsesSQLiteAndDelivers(t *testing.T) {
	t.Parallel()
	w := testworker.New(t, nil)
	dir := t.TempDir()
	p := serve(t, dir) // no flags; only ROWQ_BIND, so that the port is free
	out := p.mustCall(t, "POST", "/job/anything", map[string]any{"url": w.URL, "payload": "hello"})
	if out["queue_name"] != "default" {
		t.Errorf("unrouted job went to queue %v, want the default queue \"default\"", out["queue_name"])
	}
	testworker.WaitFor(t, 10*time.Second, "delivery", func() bool { return w.Count("hello") == 1 })
	if _, err := os.Stat(filepath.Join(dir, "rowq.db")); err != nil {
		t.Errorf("no ./rowq.db in the working directory: %v", err)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

func TestServe_SIGTERMFinishesInFlightDeliveries(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, 1500 * time.Millisecond
		})
		dbURL := dbtest.URL(t, dialect)
		dir := t.TempDir()
		// A node TTL far above the takeover time checked below: only a
		// clean release lets the next node take the queue that fast.
		env := testEnv(dbURL, "ROWQ_QUEUE_DEFAULT=q", "ROWQ_NODE_TTL=10s", "ROWQ_SHUTDOWN_TIMEOUT=20s")
		p := serve(t, dir, append(env, "ROWQ_NODE_ID=node-1")...)
		const n = 5
		ids := make([]int64, n)
		for i := range n {
			ids[i] = p.mustPush(t, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("job-%d", i)})
		}
		testworker.WaitFor(t, 10*time.Second, "5 deliveries started", func() bool { return w.Distinct() == n })
		term := time.Now()
		p.signal(t, syscall.SIGTERM)
		if code := p.wait(t, 15*time.Second); code != 0 {
			t.Errorf("exit code after SIGTERM = %d, want 0", code)
		}
		t.Logf("exited %v after SIGTERM", p.exitedAt.Sub(term).Round(time.Millisecond))
		for i := range n {
			body := fmt.Sprintf("job-%d", i)
			if got := w.Count(body); got != 1 {
				t.Errorf("%s delivered %d times, want 1", body, got)
			}
			for _, d := range w.Of(body) {
				if d.AnsweredAt.IsZero() {
					t.Errorf("%s: delivery cut short by the shutdown", body)
				} else if !d.AnsweredAt.Before(p.exitedAt) {
					t.Errorf("%s: process exited before its delivery finished", body)
				}
			}
		}
		st := dbtest.OpenURL(t, dbURL)
		for _, id := range ids {
			if !jobGone(t, st, "q", id) {
				t.Errorf("job %d still stored after a clean shutdown", id)
			}
		}
		if n, err := st.QueueLeader(context.Background(), "q"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("queue q still led after a clean shutdown: %+v, %v", n, err)
		}
		started := time.Now()
		p2 := serve(t, dir, append(env, "ROWQ_NODE_ID=node-2")...)
		testworker.WaitFor(t, 2*time.Second, "node-2 leads q", func() bool { return p2.leader(t, "q") == "node-2" })
		t.Logf("node-2 led q %v after it was started", time.Since(started).Round(time.Millisecond))
	})
}

// twoNodes starts node-a and node-b on dbURL with the node TTL and grab
// lease given, each signing its deliveries with its id as User-Agent, and
// a queue q (maxWorkers) routed from category cat. It returns the node
// that leads q and the other one, with their ids.
func twoNodes(t *testing.T, dbURL string, nodeTTL, grabLease time.Duration, maxWorkers int) (leader, other *proc, leaderID, otherID string) {
	t.Helper()
	dir := t.TempDir()
	node := func(id string) *proc {
		return serve(t, dir, testEnv(dbURL, "ROWQ_NODE_ID="+id, "ROWQ_DISPATCH_USER_AGENT="+id,
			"ROWQ_NODE_TTL="+nodeTTL.String(), "ROWQ_GRAB_LEASE="+grabLease.String())...)
	}
	nodes := map[string]*proc{"node-a": node("node-a"), "node-b": node("node-b")}
	a, b := nodes["node-a"], nodes["node-b"]
	a.mustCall(t, "PUT", "/queue/q", map[string]any{"max_workers": maxWorkers})
	a.mustCall(t, "PUT", "/routing/cat", map[string]any{"queue_name": "q"})
	testworker.WaitFor(t, 5*time.Second, "a leader of q", func() bool { leaderID = a.leader(t, "q"); return leaderID != "" })
	if got := b.leader(t, "q"); got != leaderID {
		t.Fatalf("node-a says %q leads q, node-b says %q", leaderID, got)
	}
	otherID = map[string]string{"node-a": "node-b", "node-b": "node-a"}[leaderID]
	return nodes[leaderID], nodes[otherID], leaderID, otherID
}

func TestServe_KillNineLosesNoJob(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const (
			n          = 300
			maxWorkers = 20
			killAfter  = 60 // distinct jobs delivered
			// Long enough that a heartbeat slowed by a loaded CI machine
			// (SQLite's one writer, -race builds beside) does not move the
			// queue before the kill; the test is about the kill.
			nodeTTL   = 3 * time.Second
			grabLease = 4 * time.Second
		)
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, 20 * time.Millisecond
		})
		dbURL := dbtest.URL(t, dialect)
		victim, survivor, victimID, survivorID := twoNodes(t, dbURL, nodeTTL, grabLease, maxWorkers)

		// The kill happens inside the worker, at the first delivery after
		// every job was accepted and at least killAfter were delivered:
		// deliveries are running and most jobs are still waiting.
		var (
			enqueued                    atomic.Bool
			killed                      = make(chan struct{})
			killAt                      time.Time
			killErr                     error
			deliveredAtKill, openAtKill int
		)
		w.SetOnDelivery(func(distinct, open int) {
			if !enqueued.Load() || distinct < killAfter || !killAt.IsZero() {
				return
			}
			killAt = time.Now()
			killErr = victim.cmd.Process.Kill()
			deliveredAtKill, openAtKill = distinct, open
			close(killed)
		})

		// Deferred by a second so that enqueueing, spread over both nodes,
		// ends before much is delivered.
		var (
			wg  sync.WaitGroup
			ids = make([]int64, n)
		)
		for c := range 8 {
			node := []*proc{victim, survivor}[c%2]
			wg.Go(func() {
				for i := c; i < n; i += 8 {
					id, err := node.push("cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("job-%d", i), "run_after": 1})
					if err != nil {
						t.Error(err)
						return
					}
					ids[i] = id
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		enqueued.Store(true)
		select {
		case <-killed:
		case <-time.After(15 * time.Second):
			t.Fatalf("no kill: %d of %d jobs delivered", w.Distinct(), n)
		}
		if killErr != nil {
			t.Fatalf("kill -9 %s: %v", victimID, killErr)
		}
		if code := victim.wait(t, 5*time.Second); code != -1 {
			t.Fatalf("%s exit code = %d, want -1 (killed)", victimID, code)
		}
		if deliveredAtKill >= n {
			t.Fatalf("every job was delivered before the kill: the test proved nothing")
		}

		// The survivor takes the queue once the database ends the victim's
		// session (or its registration expires), and delivers its grabs
		// again.
		testworker.WaitFor(t, nodeTTL+grabLease+3*time.Second, "every job answered", func() bool { return w.Answered() == n })
		recovered := time.Since(killAt)
		st := dbtest.OpenURL(t, dbURL)
		testworker.WaitFor(t, 5*time.Second, "every job acknowledged", func() bool {
			for _, id := range ids {
				if !jobGone(t, st, "q", id) {
					return false
				}
			}
			return true
		})
		time.Sleep(300 * time.Millisecond) // room for a stray delivery to show
		if got := survivor.leader(t, "q"); got != survivorID {
			t.Errorf("after the kill, q is led by %q, want %s", got, survivorID)
		}

		// A runner holds at most max_workers jobs, and a job leaves its
		// hands only once its outcome is committed: only those can have
		// been delivered without being acknowledged.
		twice := 0
		for i := range n {
			body := fmt.Sprintf("job-%d", i)
			ds := w.Of(body)
			for _, d := range ds {
				switch {
				case d.By == victimID && d.At.Sub(killAt) > nodeTTL/2:
					t.Errorf("%s delivered by the killed %s %v after the kill", body, victimID, d.At.Sub(killAt))
				case d.By == survivorID && d.At.Before(killAt):
					t.Errorf("%s delivered by %s before the kill, while %s led q", body, survivorID, victimID)
				case d.By != victimID && d.By != survivorID:
					t.Errorf("%s delivered with User-Agent %q", body, d.By)
				}
			}
			switch {
			case len(ds) == 2:
				twice++
				// In flight at the victim when it died, then delivered again.
				if ds[0].By != victimID || ds[1].By != survivorID {
					t.Errorf("%s delivered twice, by %s then %s; want by the killed node, then the survivor", body, ds[0].By, ds[1].By)
				}
			case len(ds) != 1:
				t.Errorf("%s delivered %d times", body, len(ds))
			}
		}
		if twice > maxWorkers {
			t.Errorf("%d jobs delivered twice, want at most max_workers = %d (those in flight at the kill)", twice, maxWorkers)
		}
		t.Logf("killed %s after %d of %d jobs delivered (%d unanswered at the worker); all answered %v after the kill; %d redelivered",
			victimID, deliveredAtKill, n, openAtKill, recovered.Round(time.Millisecond), twice)
	})
}

func TestServe_SecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	w := testworker.New(t, func(_ string, attempt int) (int, string, time.Duration) {
		if attempt == 1 {
			return 200, `{"status":"success"}`, 30 * time.Second
		}
		return 200, `{"status":"success"}`, 0
	})
	dbURL := dbtest.URL(t, "sqlite")
	dir := t.TempDir()
	env := testEnv(dbURL, "ROWQ_QUEUE_DEFAULT=q", "ROWQ_SHUTDOWN_TIMEOUT=30s")
	p := serve(t, dir, append(env, "ROWQ_NODE_ID=node-1")...)
	id := p.mustPush(t, "cat", map[string]any{"url": w.URL, "payload": "hang"})
	testworker.WaitFor(t, 10*time.Second, "delivery", func() bool { return w.Count("hang") == 1 })

	// The gap leaves the first signal time to be taken: the Go runtime
	// merges a signal that arrives while the same one is still pending.
	p.signal(t, syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond)
	if p.exited() {
		t.Fatalf("exited %d on the first SIGTERM while a delivery was in flight, want it to wait", p.cmd.ProcessState.ExitCode())
	}
	second := time.Now()
	p.signal(t, syscall.SIGTERM)
	code := p.wait(t, 5*time.Second)
	if !p.cmd.ProcessState.Exited() {
		t.Errorf("process ended by a signal (%v), want it to stop by itself", p.cmd.ProcessState)
	}
	t.Logf("exited with code %d %v after the second SIGTERM", code, p.exitedAt.Sub(second).Round(time.Millisecond))

	st := dbtest.OpenURL(t, dbURL)
	j, err := st.JobGet(context.Background(), "q", id)
	if err != nil {
		t.Fatalf("job cut short by the hard stop is not stored: %v", err)
	}
	if j.State != store.StateGrabbed || j.GrabbedBy != "node-1" {
		t.Errorf("job after the hard stop: state %q grabbed by %q, want grabbed by node-1", j.State, j.GrabbedBy)
	}

	// Once its grab expires, a new node delivers it again.
	serve(t, dir, append(env, "ROWQ_NODE_ID=node-2")...)
	testworker.WaitFor(t, 10*time.Second, "redelivery", func() bool { return w.Count("hang") == 2 })
	testworker.WaitFor(t, 5*time.Second, "job acknowledged", func() bool { return jobGone(t, st, "q", id) })
}

// TestMigrate_WaitsForTheDatabase: `rowq migrate` started before its
// database can be opened (here an SQLite file whose directory, a volume
// say, appears a second later) retries, like serve, instead of failing.
func TestMigrate_WaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	later := filepath.Join(dir, "volume")
	p := start(t, "rowq migrate", dir, nil, "migrate", "--database-url", "sqlite://"+filepath.Join(later, "rowq.db"))
	time.Sleep(time.Second)
	if err := os.Mkdir(later, 0o755); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("rowq migrate exit code = %d, want 0 once the directory exists", code)
	}
	if !strings.Contains(p.out.String(), "retrying") {
		t.Errorf("rowq migrate did not say it retried:\n%s", p.out.String())
	}
}

func TestMigrate_AppliesSchema(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		dir := t.TempDir()
		migrate := func(name, dbURL string) *proc {
			return start(t, name, dir, nil, "migrate", "--database-url", dbURL)
		}
		dbURL := dbtest.URL(t, dialect)
		for i := range 2 {
			p := migrate(fmt.Sprintf("rowq migrate #%d", i+1), dbURL)
			if code := p.wait(t, 60*time.Second); code != 0 {
				t.Fatalf("rowq migrate #%d exit code = %d, want 0", i+1, code)
			}
		}

		fresh := dbtest.URL(t, dialect)
		var ps []*proc
		for i := range 3 {
			ps = append(ps, migrate(fmt.Sprintf("concurrent rowq migrate #%d", i+1), fresh))
		}
		for i, p := range ps {
			if code := p.wait(t, 60*time.Second); code != 0 {
				t.Errorf("concurrent rowq migrate #%d exit code = %d, want 0", i+1, code)
			}
		}

		// The schema is there without migrating again.
		for _, u := range []string{dbURL, fresh} {
			st, err := backend.Open(u)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 100, MaxWorkers: 1}); err != nil {
				t.Errorf("put a queue after rowq migrate: %v", err)
			}
			if _, err := st.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "cat", URL: "http://127.0.0.1:1/"}}); err != nil {
				t.Errorf("insert a job after rowq migrate: %v", err)
			}
		}
	})
}

func TestServe_BadConfigExitsNonZero(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
	}{
		{"zero default max workers", []string{"serve", "--queue-default-max-workers", "0"}, 1, "queue-default-max-workers"},
		{"database URL without scheme", []string{"serve", "--database-url", "nope"}, 1, "database-url"},
		{"unknown command", []string{"bogus"}, 2, `unknown command "bogus"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			// Should the configuration pass, the node must not collide
			// with anything: any port, a database in dir.
			p := start(t, "rowq "+strings.Join(tc.args, " "), dir, []string{"ROWQ_BIND=127.0.0.1:0"}, tc.args...)
			if code := p.wait(t, 10*time.Second); code != tc.wantCode {
				t.Errorf("exit code = %d, want %d", code, tc.wantCode)
			}
			if out := p.out.String(); !strings.Contains(out, tc.wantOut) {
				t.Errorf("output does not mention %q:\n%s", tc.wantOut, out)
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Errorf("a refused configuration left files behind: %v", ents)
			}
		})
	}
}
