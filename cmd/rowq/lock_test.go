package main_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
	"github.com/rowq/rowq/rowqtype"
)

// holding is one holder's stay in the critical section, as it saw it:
// from the acquire's answer to just before its release.
type holding struct {
	owner      string
	token      int64
	start, end time.Time
}

// lockEnv is testEnv for lock tests: locks need no fast heartbeats, and
// calmer nodes keep the machine free for the other tests running beside.
func lockEnv(dbURL, node string) []string {
	return testEnv(dbURL, "ROWQ_NODE_ID="+node, "ROWQ_CONFIG_REFRESH_INTERVAL=1s", "ROWQ_NODE_TTL=10s")
}

// Three rowq processes share one database; clients spread over them
// contend for a lock and for a semaphore.
func TestLock_ContentionAcrossThreeNodes(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		dbURL := dbtest.URL(t, dialect)
		dir := t.TempDir()
		var nodes []*client.Client
		for i := range 3 {
			p := serve(t, dir, lockEnv(dbURL, "node-"+strconv.Itoa(i))...)
			nodes = append(nodes, client.New(p.addr, nil))
		}
		t.Run("lock", func(t *testing.T) { testContendLock(t, nodes) })
		t.Run("semaphore", func(t *testing.T) { testContendSemaphore(t, nodes) })
	})
}

// testContendLock: 50 clients contend for one lock; each holder logs when
// it held it. No two holdings overlap, and tokens increase in the order of
// holding.
func testContendLock(t *testing.T, nodes []*client.Client) {
	const (
		clients = 50
		// A holding is a few milliseconds; the TTL is far longer so that a
		// loaded machine cannot let a lease expire mid-hold (which would
		// be a legitimate takeover, not a bug).
		ttl  = 10 * time.Second
		wait = 4 * time.Minute
	)
	var (
		mu      sync.Mutex
		log     []holding
		inside  atomic.Int32
		overlap atomic.Int32
		wg      sync.WaitGroup
		errs    = make(chan error, clients)
	)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range clients {
		c := nodes[i%len(nodes)]
		owner := fmt.Sprintf("client-%02d", i)
		wg.Go(func() {
			l, err := c.Acquire(ctx, "hot", owner, client.AcquireOptions{TTL: ttl, Wait: wait})
			if err != nil {
				errs <- fmt.Errorf("%s: acquire: %w", owner, err)
				return
			}
			h := holding{owner: owner, token: l.Token, start: time.Now()}
			if inside.Add(1) != 1 {
				overlap.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
			inside.Add(-1)
			h.end = time.Now()
			mu.Lock()
			log = append(log, h)
			mu.Unlock()
			if _, err := c.Release(ctx, l); err != nil {
				errs <- fmt.Errorf("%s: release of token %d: %w", owner, l.Token, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := overlap.Load(); n > 0 {
		t.Errorf("%d holders entered while another was inside", n)
	}
	if len(log) != clients {
		t.Fatalf("%d of %d clients held the lock", len(log), clients)
	}
	sort.Slice(log, func(i, j int) bool { return log[i].start.Before(log[j].start) })
	for i := 1; i < len(log); i++ {
		prev, cur := log[i-1], log[i]
		if cur.start.Before(prev.end) {
			t.Errorf("%s (token %d) held from %v, before %s (token %d) let go at %v",
				cur.owner, cur.token, cur.start.Format(time.StampMicro), prev.owner, prev.token, prev.end.Format(time.StampMicro))
		}
		if cur.token <= prev.token {
			t.Errorf("token %d of %s follows token %d of %s: not increasing in holding order", cur.token, cur.owner, prev.token, prev.owner)
		}
	}
}

// testContendSemaphore: a semaphore never has more than its limit of
// holders, and each holder has its own token.
func testContendSemaphore(t *testing.T, nodes []*client.Client) {
	const clients, limit = 24, 3
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		inside, most atomic.Int32
		mu           sync.Mutex
		tokens       = map[int64]string{}
		wg           sync.WaitGroup
		errs         = make(chan error, 2*clients)
	)
	for i := range clients {
		c := nodes[i%len(nodes)]
		owner := fmt.Sprintf("worker-%02d", i)
		wg.Go(func() {
			l, err := c.Acquire(ctx, "pool", owner, client.AcquireOptions{TTL: 10 * time.Second, Wait: 4 * time.Minute, Limit: limit})
			if err != nil {
				errs <- fmt.Errorf("%s: acquire: %w", owner, err)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			mu.Lock()
			if other, dup := tokens[l.Token]; dup {
				errs <- fmt.Errorf("token %d handed to %s and %s", l.Token, other, owner)
			}
			tokens[l.Token] = owner
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			inside.Add(-1)
			if _, err := c.Release(ctx, l); err != nil {
				errs <- fmt.Errorf("%s: release: %w", owner, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := most.Load(); m > limit {
		t.Errorf("%d holders at once, limit %d", m, limit)
	}
	if len(tokens) != clients {
		t.Errorf("%d distinct tokens for %d holders", len(tokens), clients)
	}
}

// A holder that vanishes without releasing (its client and the node it
// used are killed) blocks others until its lease expires by the
// database's clock, and not after.
func TestLock_VanishedHolderExpires(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		// Long enough that a loaded machine still asks again before the
		// lease expires.
		const ttl = 5 * time.Second
		dbURL := dbtest.URL(t, dialect)
		dir := t.TempDir()
		a := serve(t, dir, lockEnv(dbURL, "node-a")...)
		b := serve(t, dir, lockEnv(dbURL, "node-b")...)
		ca, cb := client.New(a.addr, nil), client.New(b.addr, nil)
		ctx := t.Context()

		gone, err := ca.Acquire(ctx, "singleton", "vanished:1", client.AcquireOptions{TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		a.cmd.Process.Kill()
		<-a.done

		// Before the expiry: refused, naming the vanished holder.
		_, err = cb.Acquire(ctx, "singleton", "next:2", client.AcquireOptions{TTL: time.Minute})
		var held *client.HeldError
		if !errors.As(err, &held) || len(held.Holders) != 1 || held.Holders[0].Owner != "vanished:1" {
			t.Fatalf("acquire before the expiry: err = %v, want 409 naming vanished:1", err)
		}
		st := dbtest.OpenURL(t, dbURL)
		if now, err := st.Now(ctx); err != nil || !now.Before(gone.ExpiresAt) {
			t.Fatalf("the refusal came at %v (%v), not before the expiry %v: the machine is too slow for this test's TTL", now, err, gone.ExpiresAt)
		}

		// Waiting, it gets the lock once the lease has expired.
		l, err := cb.Acquire(ctx, "singleton", "next:2", client.AcquireOptions{TTL: time.Minute, Wait: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if l.Token <= gone.Token {
			t.Errorf("token after expiry = %d, want > %d", l.Token, gone.Token)
		}
		if l.AcquiredAt.Before(gone.ExpiresAt) {
			t.Errorf("acquired at %v, before the vanished lease expired at %v", l.AcquiredAt, gone.ExpiresAt)
		}
		// "Right after": the waiter polls; allow for a slow machine.
		if d := l.AcquiredAt.Sub(gone.ExpiresAt); d > 5*time.Second {
			t.Errorf("acquired %v after the expiry; want it soon after", d)
		}
		// The vanished holder's stale lease can no longer be renewed or
		// released, and trying changes nothing.
		if _, err := cb.Renew(ctx, gone, time.Hour); !client.IsConflict(err) {
			t.Errorf("renew of the vanished lease: err = %v, want 409", err)
		}
		if _, err := cb.Release(ctx, gone); !client.IsConflict(err) {
			t.Errorf("release of the vanished lease: err = %v, want 409", err)
		}
		h, err := cb.Lock(ctx, "singleton")
		if err != nil || len(h.Holders) != 1 || h.Holders[0].Token != l.Token || !h.Holders[0].ExpiresAt.Equal(l.ExpiresAt) {
			t.Fatalf("holders after stale renew and release = %+v, %v; want only %+v unchanged", h, err, l)
		}
	})
}

// rowq lock run holds the lock while the command runs, gives it the token,
// exits with its code, and stops it if the lease is lost.
func TestLockRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := serve(t, dir, lockEnv(dbtest.URL(t, "sqlite"), "node")...)
	c := client.New(p.addr, nil)
	env := []string{"ROWQ_SERVER=" + p.addr}
	out := filepath.Join(dir, "out")

	// The command sees its token and the lock is held while it runs.
	script := `echo "$ROWQ_LOCK_TOKEN $ROWQ_LOCK_NAME" > ` + out + `; sleep 1; exit 7`
	run := start(t, "rowq lock run", dir, env, "lock", "run", "job", "--ttl", "3s", "--owner", "runner", "--", "sh", "-c", script)
	var h *rowqtype.Lock
	testworker.WaitFor(t, 30*time.Second, "the lock held by the command", func() bool {
		var err error
		h, err = c.Lock(t.Context(), "job")
		return err == nil && len(h.Holders) == 1
	})
	if code := run.wait(t, time.Minute); code != 7 {
		t.Fatalf("rowq lock run exited %d, want the command's 7; output:\n%s", code, run.out)
	}
	got, err := os.ReadFile(out)
	if err != nil || strings.TrimSpace(string(got)) != strconv.FormatInt(h.Holders[0].Token, 10)+" job" || h.Holders[0].Owner != "runner" {
		t.Fatalf("command saw %q (%v), want the token %d and the name; holder %+v", got, err, h.Holders[0].Token, h.Holders[0])
	}
	if h, err := c.Lock(t.Context(), "job"); err != nil || len(h.Holders) != 0 {
		t.Fatalf("lock after the command exited: %+v, %v; want released", h, err)
	}

	// While someone else holds it, the command does not run.
	other, err := c.Acquire(t.Context(), "job", "other", client.AcquireOptions{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	blocked := start(t, "rowq lock run (blocked)", dir, env, "lock", "run", "job", "--ttl", "5s", "--wait", "200ms", "--", "sh", "-c", "touch "+out+".ran")
	if code := blocked.wait(t, time.Minute); code != 75 || !strings.Contains(blocked.out.String(), `held by other`) {
		t.Fatalf("rowq lock run on a held lock exited %d, want 75 naming the holder; output:\n%s", code, blocked.out)
	}
	if _, err := os.Stat(out + ".ran"); err == nil {
		t.Fatal("the command ran while the lock was held by another owner")
	}
	if _, err := c.Release(t.Context(), other); err != nil {
		t.Fatal(err)
	}

	// A command that cannot be started exits as a shell would, and the
	// lock is let go.
	missing := start(t, "rowq lock run (missing)", dir, env, "lock", "run", "job", "--ttl", "5s", "--", filepath.Join(dir, "no-such-command"))
	if code := missing.wait(t, time.Minute); code != 127 {
		t.Fatalf("rowq lock run of a missing command exited %d, want 127; output:\n%s", code, missing.out)
	}
	if h, err := c.Lock(t.Context(), "job"); err != nil || len(h.Holders) != 0 {
		t.Fatalf("lock after a command that did not start: %+v, %v; want released", h, err)
	}

	// A lost lease stops the command and says so.
	long := start(t, "rowq lock run (lost)", dir, env, "lock", "run", "job", "--ttl", "3s", "--owner", "doomed", "--", "sleep", "60")
	var lease *rowqtype.Lease
	testworker.WaitFor(t, 30*time.Second, "the lock held by sleep", func() bool {
		h, err := c.Lock(t.Context(), "job")
		if err != nil || len(h.Holders) != 1 {
			return false
		}
		lease = h.Holders[0]
		return true
	})
	if _, err := c.Release(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	if code := long.wait(t, time.Minute); code != 70 || !strings.Contains(long.out.String(), `lock "job" lost`) {
		t.Fatalf("rowq lock run after its lease was taken exited %d, want 70 with a message; output:\n%s", code, long.out)
	}
}
