// Package storetest is the conformance suite every store dialect passes.
// A dialect's test calls Run with a function that opens a fresh, migrated
// store on a real database.
package storetest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// NewStore opens a fresh, migrated, empty store for one test and arranges
// for it to be closed when the test ends.
type NewStore func(t *testing.T) store.Store

// Run runs every conformance test against the stores newStore opens.
func Run(t *testing.T, newStore NewStore) {
	run(t, newStore, slices.Concat(allTests(), sessionTests))
}

// RunLocalSessions runs the conformance tests for a store on a server
// whose session locks are local to it (a Galera member): node sessions are
// refused with store.ErrLocalSession, and the rest is as Run's.
func RunLocalSessions(t *testing.T, newStore NewStore) {
	run(t, newStore, slices.Concat(allTests(), []conformanceTest{{"Nodes_SessionsLocal", testSessionsLocal}}))
}

// allTests are the conformance tests of every store, sessions aside.
func allTests() []conformanceTest {
	return slices.Concat(storeTests, nodeTests, queueTests, routingTests, jobTests, failedTests, finishedTests, flowTests,
		leaseTests, pullTests, keyTests, inspectTests, statsTests, lockTests, scheduleTests, tokenTests, secretTests, outboxTests, workerHostTests)
}

// RunJobWrites runs the conformance tests of the nouns that insert jobs
// already grabbed (jobs, leases and concurrency keys), for a dialect that
// inserts them in more than one way: MySQL's store runs them again with
// the path a MySQL server takes (no INSERT … RETURNING) forced on MariaDB.
func RunJobWrites(t *testing.T, newStore NewStore) {
	run(t, newStore, slices.Concat(jobTests, leaseTests, keyTests))
}

func run(t *testing.T, newStore NewStore, tests []conformanceTest) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !slices.Contains(aloneTests, tc.name) {
				t.Parallel()
			}
			tc.fn(t, newStore(t))
		})
	}
}

// aloneTests run before the others, which run in parallel: tests heavy
// enough to starve the others' timings (a fan-in of 10,000 jobs under
// -race).
var aloneTests = []string{"Flow_FanIn"}

// storeTests are the conformance tests of what Store adds to the noun
// interfaces: migrations and the clock.
var storeTests = []conformanceTest{
	{"Migrate_Twice", testMigrateTwice},
	{"Migrate_Concurrent", testMigrateConcurrent},
	{"Now_IsUTCAndClose", testNow},
}

// conformanceTest is one test of the suite.
type conformanceTest struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// must turns a (value, error) result into the value, failing the test on
// an error: must(s.QueueGet(ctx, "q"))(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func putQueue(t *testing.T, s store.Store, name string) *store.Queue {
	t.Helper()
	return must(s.QueuePut(ctxT(t), &store.Queue{Name: name, PollingInterval: 200, MaxWorkers: 20}))(t)
}

func insert(t *testing.T, s store.Store, queue string, n int, runAfter time.Duration) []int64 {
	t.Helper()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = &store.JobInsertParams{
			Queue: queue, Category: "cat", URL: "http://127.0.0.1:1/work",
			Payload:  json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			RunAfter: runAfter, MaxRetries: 3, RetryDelay: 1, Timeout: 5,
		}
	}
	return must(s.JobsInsert(ctxT(t), ps))(t)
}

func heartbeat(t *testing.T, s store.Store, node string, ttl time.Duration) {
	t.Helper()
	ok(t, s.NodeHeartbeat(ctxT(t), &store.NodeHeartbeatParams{ID: node, Host: node + ":8080", TTL: ttl}))
}

func testMigrateTwice(t *testing.T, s store.Store) {
	ok(t, s.Migrate(ctxT(t)))
	ok(t, s.Migrate(ctxT(t)))
}

func testMigrateConcurrent(t *testing.T, s store.Store) {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- s.Migrate(ctxT(t)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		ok(t, err)
	}
}

func testNow(t *testing.T, s store.Store) {
	now := must(s.Now(ctxT(t)))(t)
	if now.Location() != time.UTC {
		t.Errorf("Now location = %v, want UTC", now.Location())
	}
	if d := time.Since(now); d > time.Minute || d < -time.Minute {
		t.Errorf("database clock is %v away from this host's", d)
	}
}

func jobIDs(js []*store.Job) []int64 {
	ids := make([]int64, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return ids
}

func sorted[T cmp.Ordered](xs []T) []T {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}
