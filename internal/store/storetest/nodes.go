package storetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// nodeTests are the conformance tests of store.NodeStore, with the leadership it gives (QueuesClaim).
var nodeTests = []conformanceTest{
	{"Nodes_LeadershipClaimAndTakeover", testLeadership},
	{"Nodes_ConcurrentClaimOneLeader", testLeadershipConcurrent},
	{"Nodes_ClaimLimitAndYield", testClaimLimitAndYield},
	{"Nodes_ConcurrentLimitedClaimsOneLeader", testLimitedClaimsConcurrent},
	{"Nodes_LiveCountsLeads", testNodesLive},
	{"Nodes_Glance", testNodesGlance},
	{"Nodes_ReapExpired", testNodesReapExpired},
}

// sessionTests are the conformance tests of node sessions
// (NodeSessionOpen, NodesReap), for a store that holds them.
var sessionTests = []conformanceTest{
	{"Nodes_SessionKeepsNodeFromReap", testNodeSessionHeld},
	{"Nodes_SessionClosedIsReapedAndGrabsRescued", testNodeSessionClosed},
	{"Nodes_WithoutSessionNeverReaped", testNodeWithoutSession},
	{"Nodes_SessionConflict", testNodeSessionConflict},
}

// testSessionsLocal: a store on a server whose session locks are its own
// (a Galera member) refuses a node session with store.ErrLocalSession.
func testSessionsLocal(t *testing.T, s store.Store) {
	if sess, err := s.NodeSessionOpen(ctxT(t), "n1"); !errors.Is(err, store.ErrLocalSession) {
		if sess != nil {
			sess.Close()
		}
		t.Fatalf("NodeSessionOpen = %v, want store.ErrLocalSession", err)
	}
}

// testNodesReapExpired: the registrations that expired are reaped, with or
// without a session, and their grabs expire at once; live ones are kept.
func testNodesReapExpired(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	insert(t, s, "q", 3, 0)
	// A TTL long enough for the steps before the first reap on a loaded
	// machine; the reap is then awaited, not slept for.
	const ttl = 3 * time.Second
	heartbeat(t, s, "lapsed", ttl)
	ok(t, s.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "lapsed-session", Host: "l", TTL: ttl, Session: true}))
	heartbeat(t, s, "live", time.Minute)
	for _, n := range []string{"lapsed", "lapsed-session", "live"} {
		must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: n, Limit: 1, Lease: time.Hour}))(t)
	}
	if got := must(s.NodesReapExpired(ctx))(t); len(got) != 0 {
		t.Fatalf("NodesReapExpired before any expiry = %v", got)
	}
	var reaped []string
	for deadline := time.Now().Add(30 * time.Second); len(reaped) < 2 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		reaped = append(reaped, must(s.NodesReapExpired(ctx))(t)...)
	}
	if got := sorted(reaped); fmt.Sprint(got) != "[lapsed lapsed-session]" {
		t.Fatalf("NodesReapExpired = %v, want [lapsed lapsed-session]", got)
	}
	if got := must(s.NodesReapExpired(ctx))(t); len(got) != 0 {
		t.Fatalf("NodesReapExpired again = %v, want nothing", got)
	}
	if n := must(s.JobsRescue(ctx, "q"))(t); n != 2 {
		t.Fatalf("JobsRescue = %d, want the 2 of the reaped nodes", n)
	}
	if c := must(s.NodesLive(ctx))(t); len(c.Nodes) != 1 || c.Nodes[0].ID != "live" {
		t.Fatalf("NodesLive after the reap = %+v, want live alone", c.Nodes)
	}
}

func testLeadership(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "a")
	putQueue(t, s, "b")
	if _, err := s.QueueLeader(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueLeader with none err = %v", err)
	}
	heartbeat(t, s, "n1", 600*time.Millisecond)
	heartbeat(t, s, "n2", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n1"}))
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2"}))
	if led := ledBy(t, s, "n1"); len(led) != 2 || led[0].Name != "a" || led[0].MaxWorkers != 20 {
		t.Fatalf("n1 leads %+v, want a and b", led)
	}
	if led := ledBy(t, s, "n2"); len(led) != 0 {
		t.Fatalf("n2 leads %+v while n1 is alive", led)
	}
	leader := must(s.QueueLeader(ctx, "a"))(t)
	if leader.ID != "n1" || leader.Host != "n1:8080" {
		t.Fatalf("QueueLeader = %+v", leader)
	}
	// A new queue is claimed by the next claim.
	putQueue(t, s, "c")
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2"}))
	if led := ledBy(t, s, "n2"); len(led) != 1 || led[0].Name != "c" {
		t.Fatalf("n2 leads %+v, want c", led)
	}
	// n1 stops heartbeating: n2 takes over once n1's registration expires.
	time.Sleep(700 * time.Millisecond)
	if _, err := s.QueueLeader(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueLeader of expired node err = %v", err)
	}
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2"}))
	if led := ledBy(t, s, "n2"); len(led) != 3 {
		t.Fatalf("n2 leads %+v after takeover, want 3", led)
	}
	if led := ledBy(t, s, "n1"); len(led) != 0 {
		t.Fatalf("expired n1 still leads %+v", led)
	}
	// Release hands the queues back to the pool; deleting the node too.
	ok(t, s.QueuesRelease(ctx, "n2"))
	if led := ledBy(t, s, "n2"); len(led) != 0 {
		t.Fatalf("n2 leads %+v after release", led)
	}
	heartbeat(t, s, "n3", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n3"}))
	if led := ledBy(t, s, "n3"); len(led) != 3 {
		t.Fatalf("n3 leads %+v after release, want 3", led)
	}
	ok(t, s.NodeDelete(ctx, "n3"))
	if _, err := s.QueueLeader(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueLeader of deleted node err = %v", err)
	}
	heartbeat(t, s, "n4", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n4"}))
	if led := ledBy(t, s, "n4"); len(led) != 3 {
		t.Fatalf("n4 leads %+v after n3 deleted, want 3", led)
	}
	// An unregistered node claims nothing.
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "ghost"}))
	if led := ledBy(t, s, "ghost"); len(led) != 0 {
		t.Fatalf("unregistered node leads %+v", led)
	}
}

func testLeadershipConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for i := range 20 {
		putQueue(t, s, fmt.Sprintf("q%02d", i))
	}
	nodes := []string{"n1", "n2", "n3", "n4"}
	for _, n := range nodes {
		heartbeat(t, s, n, time.Minute)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		wg.Go(func() { errs <- s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: n}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		ok(t, err)
	}
	led := map[string]string{}
	for _, n := range nodes {
		for _, q := range ledBy(t, s, n) {
			if prev, dup := led[q.Name]; dup {
				t.Fatalf("queue %s led by %s and %s", q.Name, prev, n)
			}
			led[q.Name] = n
		}
	}
	if len(led) != 20 {
		t.Fatalf("%d queues led, want 20", len(led))
	}
}

// openSession opens node id's session, closed when the test ends. Every
// dialect holds sessions where rowq's tests run (SQLite only off unix
// cannot), so an unsupported session fails the test.
func openSession(t *testing.T, s store.Store, id string) store.NodeSession {
	t.Helper()
	sess, err := s.NodeSessionOpen(ctxT(t), id)
	ok(t, err)
	t.Cleanup(func() { sess.Close() })
	return sess
}

// register heartbeats node with a session and makes it lead queue.
func register(t *testing.T, s store.Store, node, queue string) {
	t.Helper()
	ctx := ctxT(t)
	ok(t, s.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: node, Host: node + ":8080", TTL: time.Minute, Session: true}))
	putQueue(t, s, queue)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: node}))
	if l := must(s.QueueLeader(ctx, queue))(t); l.ID != node {
		t.Fatalf("queue %s led by %s, want %s", queue, l.ID, node)
	}
}

// reap calls NodesReap until it returns want (nil: nothing) or, for want
// not nil, the deadline passes: a lock freed by a connection's or a
// process's end is freed as soon as the server or kernel has seen it end.
func reap(t *testing.T, s store.Store, want []string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := must(s.NodesReap(ctxT(t)))(t)
		if fmt.Sprint(sorted(got)) == fmt.Sprint(want) {
			return time.Since(start)
		}
		if len(got) != 0 || time.Since(start) > within {
			t.Fatalf("NodesReap = %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gone fails the test unless node's registration is gone: the queue it
// led has no leader.
func gone(t *testing.T, s store.Store, node, queue string) {
	t.Helper()
	if l, err := s.QueueLeader(ctxT(t), queue); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("queue %s after %s was reaped: leader %+v, err %v", queue, node, l, err)
	}
}

func testNodeSessionHeld(t *testing.T, s store.Store) {
	sess := openSession(t, s, "n1")
	register(t, s, "n1", "q")
	ok(t, sess.Check(ctxT(t)))
	reap(t, s, nil, 0)
	if l := must(s.QueueLeader(ctxT(t), "q"))(t); l.ID != "n1" {
		t.Fatalf("after NodesReap, q is led by %q, want n1", l.ID)
	}
	ok(t, sess.Check(ctxT(t)))
}

func testNodeSessionClosed(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	s1 := openSession(t, s, "n1")
	register(t, s, "n1", "q1")
	openSession(t, s, "n2")
	register(t, s, "n2", "q2")
	insert(t, s, "q1", 2, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q1", Node: "n1", Limit: 2, Lease: time.Hour}))(t)

	ok(t, s1.Close())
	ok(t, s1.Close()) // idempotent
	if err := s1.Check(ctx); err == nil {
		t.Fatal("Check of a closed session succeeded")
	}
	reap(t, s, []string{"n1"}, 0)
	gone(t, s, "n1", "q1")
	reap(t, s, nil, 0)
	if l := must(s.QueueLeader(ctx, "q2"))(t); l.ID != "n2" {
		t.Fatalf("q2 led by %q, want n2", l.ID)
	}
	// The reaped node's grabs are expired at once, whatever their lease.
	if got := must(s.JobsExpired(ctx, []string{"q1", "q2"}))(t); fmt.Sprint(got) != "[q1]" {
		t.Fatalf("JobsExpired = %v, want [q1]", got)
	}
	if n := must(s.JobsRescue(ctx, "q1"))(t); n != 2 {
		t.Fatalf("JobsRescue = %d, want the reaped node's 2", n)
	}
	// The id can hold a session again.
	openSession(t, s, "n1")
}

func testNodeWithoutSession(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	insert(t, s, "q", 3, 0)
	heartbeat(t, s, "expired", 100*time.Millisecond)
	heartbeat(t, s, "live", time.Minute)
	// A node that had a session and heartbeats without one is not reaped
	// either: each heartbeat stores Session anew.
	sess := openSession(t, s, "dropped")
	ok(t, s.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "dropped", Host: "d", TTL: time.Minute, Session: true}))
	heartbeat(t, s, "dropped", time.Minute)
	ok(t, sess.Close())
	for _, n := range []string{"expired", "live", "dropped"} {
		must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: n, Limit: 1, Lease: time.Hour}))(t)
	}
	time.Sleep(200 * time.Millisecond)
	reap(t, s, nil, 0)
	// Every row is still there (the expired one too): their grabs wait for
	// their lease.
	if got := must(s.JobsExpired(ctx, []string{"q"}))(t); len(got) != 0 {
		t.Fatalf("JobsExpired = %v: a node without a session lost its row", got)
	}
}

func testNodeSessionConflict(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	s1 := openSession(t, s, "n1")
	if again, err := s.NodeSessionOpen(ctx, "n1"); !errors.Is(err, store.ErrConflict) {
		if again != nil {
			again.Close()
		}
		t.Fatalf("second NodeSessionOpen(n1) err = %v, want ErrConflict", err)
	}
	ok(t, s1.Check(ctx)) // the refused attempt did not disturb the holder
	openSession(t, s, "n2")
	ok(t, s1.Close())
	openSession(t, s, "n1")
}

// NodeSessionKilled checks, on s, that a session whose connection (or
// file) kill ends from outside, as a network cut or a killed backend
// would, fails its Check and lets NodesReap reap its node.
func NodeSessionKilled(t *testing.T, s store.Store, kill func(t *testing.T, sess store.NodeSession)) {
	ctx := ctxT(t)
	sess := openSession(t, s, "n1")
	register(t, s, "n1", "q")
	reap(t, s, nil, 0)
	kill(t, sess)
	took := reap(t, s, []string{"n1"}, 10*time.Second)
	t.Logf("reaped %v after the kill", took)
	gone(t, s, "n1", "q")
	if err := sess.Check(ctx); err == nil {
		t.Fatal("Check of a killed session succeeded")
	}
	ok(t, sess.Close())
	openSession(t, s, "n1")
}

// childURLEnv passes the database URL to the child process of
// NodeSessionProcessKilled.
const childURLEnv = "ROWQ_TEST_NODE_SESSION_CHILD_URL"

// NodeSessionProcessKilled checks that the session of a process killed
// with SIGKILL is reaped at once. The calling test, named by run (a
// -test.run pattern), plays two parts: in the test process it opens a
// database (databaseURL) and starts the test binary again, running only
// itself, as a child that opens a store there (open), opens the session of
// node "child", registers it with Session set and waits to be killed.
func NodeSessionProcessKilled(t *testing.T, run string, databaseURL func(t testing.TB) string, open func(t testing.TB, url string) store.Store) {
	if url := os.Getenv(childURLEnv); url != "" {
		sessionChild(t, open(t, url))
		return
	}
	url := databaseURL(t)
	s := open(t, url)
	ctx := ctxT(t)
	cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.count=1")
	cmd.Env = append(os.Environ(), childURLEnv+"="+url)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	ok(t, err)
	ok(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if line := lines.Text(); strings.HasPrefix(line, "ready") || strings.Contains(line, "FAIL") {
				ready <- line
				break
			}
		}
		close(ready)
		for lines.Scan() { // drain, so that the child never blocks on its output
		}
	}()
	select {
	case line := <-ready:
		if !strings.HasPrefix(line, "ready") {
			t.Fatalf("child: %q", line)
		}
	case <-ctx.Done():
		t.Fatal("child not ready")
	}
	if l := must(s.QueueLeader(ctx, "q"))(t); l.ID != "child" {
		t.Fatalf("q led by %q, want child", l.ID)
	}
	reap(t, s, nil, 0)
	ok(t, cmd.Process.Kill())
	killed := time.Now()
	cmd.Wait()
	reap(t, s, []string{"child"}, 10*time.Second)
	t.Logf("reaped %v after SIGKILL", time.Since(killed))
	gone(t, s, "child", "q")
}

// sessionChild is the child's part of NodeSessionProcessKilled.
func sessionChild(t *testing.T, s store.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sess, err := s.NodeSessionOpen(ctx, "child")
	ok(t, err)
	defer sess.Close()
	register(t, s, "child", "q")
	fmt.Println("ready")
	<-ctx.Done()
	t.Fatal("child: not killed within a minute")
}

// ledNames returns the names of the queues node leads.
func ledNames(t *testing.T, s store.Store, node string) []string {
	t.Helper()
	var names []string
	for _, q := range ledBy(t, s, node) {
		names = append(names, q.Name)
	}
	return names
}

func testClaimLimitAndYield(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, q := range []string{"a", "b", "c", "d", "e"} {
		putQueue(t, s, q)
	}
	heartbeat(t, s, "n1", time.Minute)
	heartbeat(t, s, "n2", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n1", Limit: 2}))
	if got := fmt.Sprint(ledNames(t, s, "n1")); got != "[a b]" {
		t.Fatalf("n1 claimed %s with limit 2, want [a b] (name order)", got)
	}
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2", Limit: 2}))
	if got := fmt.Sprint(ledNames(t, s, "n2")); got != "[c d]" {
		t.Fatalf("n2 claimed %s with limit 2, want [c d] (a and b are led)", got)
	}
	// A yield gives up only the named queues the node leads.
	ok(t, s.QueuesYield(ctx, &store.QueuesYieldParams{Node: "n1", Queues: []string{"a", "c", "zz"}}))
	if got := fmt.Sprint(ledNames(t, s, "n1")); got != "[b]" {
		t.Fatalf("n1 leads %s after yielding a, want [b]", got)
	}
	if got := fmt.Sprint(ledNames(t, s, "n2")); got != "[c d]" {
		t.Fatalf("n2 leads %s after n1 yielded c (which n2 leads), want [c d]", got)
	}
	ok(t, s.QueuesYield(ctx, &store.QueuesYieldParams{Node: "n1"})) // nothing named: nothing happens
	// Limit 0 claims every free queue: a (yielded) and e (never led).
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2"}))
	if got := fmt.Sprint(ledNames(t, s, "n2")); got != "[a c d e]" {
		t.Fatalf("n2 leads %s after an unbounded claim, want [a c d e]", got)
	}
	if got := fmt.Sprint(ledNames(t, s, "n1")); got != "[b]" {
		t.Fatalf("n1 leads %s, want [b]: a claim takes no live node's queue", got)
	}
}

// testLimitedClaimsConcurrent races bounded claims of several nodes: every
// queue ends with one leader, and no node takes more than its limit.
func testLimitedClaimsConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const queues, limit = 40, 15
	for i := range queues {
		putQueue(t, s, fmt.Sprintf("q%02d", i))
	}
	nodes := []string{"n1", "n2", "n3", "n4"}
	for _, n := range nodes {
		heartbeat(t, s, n, time.Minute)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		wg.Go(func() { errs <- s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: n, Limit: limit}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		ok(t, err)
	}
	seen := map[string]string{}
	for _, n := range nodes {
		led := ledNames(t, s, n)
		if len(led) > limit {
			t.Errorf("%s claimed %d queues, limit %d", n, len(led), limit)
		}
		for _, q := range led {
			if other, dup := seen[q]; dup {
				t.Errorf("queue %s led by %s and %s", q, other, n)
			}
			seen[q] = n
		}
	}
	// Claims that lost races took fewer than their limit; the free queues
	// left are claimed by the next round.
	for _, n := range nodes {
		ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: n, Limit: limit}))
	}
	total := 0
	for _, n := range nodes {
		total += len(ledNames(t, s, n))
	}
	if total != queues {
		t.Fatalf("%d of %d queues led after a second round of claims", total, queues)
	}
}

func testNodesLive(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	c := must(s.NodesLive(ctx))(t)
	if len(c.Nodes) != 0 || c.Queues != 0 {
		t.Fatalf("NodesLive of an empty database = %+v", c)
	}
	for _, q := range []string{"a", "b", "c"} {
		putQueue(t, s, q)
	}
	heartbeat(t, s, "n2", time.Minute)
	heartbeat(t, s, "n1", time.Minute)
	heartbeat(t, s, "gone", 300*time.Millisecond)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "gone", Limit: 1}))
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2", Limit: 1}))
	time.Sleep(400 * time.Millisecond) // "gone" expires; it still names a as its queue
	c = must(s.NodesLive(ctx))(t)
	var got []string
	for _, n := range c.Nodes {
		got = append(got, fmt.Sprintf("%s:%d", n.ID, n.Leads))
		if n.Host != n.ID+":8080" || n.ExpiresAt.Before(n.StartedAt) {
			t.Errorf("node %+v", n)
		}
	}
	if fmt.Sprint(got) != "[n1:0 n2:1]" || c.Queues != 3 {
		t.Fatalf("NodesLive = %v, %d queues; want [n1:0 n2:1] (the expired node left out), 3", got, c.Queues)
	}
}

func testNodesGlance(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	g := must(s.NodesGlance(ctx))(t)
	if len(g.Nodes) != 0 || g.Free {
		t.Fatalf("NodesGlance of an empty database = %+v", g)
	}
	putQueue(t, s, "a")
	putQueue(t, s, "b")
	heartbeat(t, s, "n2", time.Minute)
	heartbeat(t, s, "n1", time.Minute)
	heartbeat(t, s, "gone", 300*time.Millisecond)
	if g := must(s.NodesGlance(ctx))(t); fmt.Sprint(g.Nodes) != "[gone n1 n2]" || !g.Free {
		t.Fatalf("NodesGlance = %+v, want [gone n1 n2] and a free queue", g)
	}
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n1"}))
	time.Sleep(400 * time.Millisecond) // "gone" expires
	if g := must(s.NodesGlance(ctx))(t); fmt.Sprint(g.Nodes) != "[n1 n2]" || g.Free {
		t.Fatalf("NodesGlance = %+v, want [n1 n2] (the expired node left out) and no free queue", g)
	}
}
