package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAnalyze_CountsAndFailover(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok := func(by string, from, to int) delivery {
		return delivery{at: at(from), end: at(to), by: by, outcome: success}
	}
	jobs := [][]delivery{
		0: {ok("a", 10, 20)},
		1: {{at: at(90), end: at(150), by: "a", outcome: cut}, ok("b", 3100, 3110)}, // open at the kill, delivered again
		2: {{at: at(40), end: at(50), by: "a", outcome: fault}, ok("a", 60, 70)},    // a retry after a worker fault
		3: {ok("a", 80, 90), ok("b", 5000, 5010)},                                   // done before the kill, still delivered again
		4: {},                                                                       // accepted, never delivered
		5: {ok("b", 4000, 4010)},                                                    // held (grabbed) at the kill
		6: {ok("b", 2000, 2010)},                                                    // enqueue failed, still delivered
		7: {ok("c", 1000, 1010)},                                                    // by c, stopped at the kill
	}
	accepted := []bool{true, true, true, true, true, true, false, true}
	kills := []*killRecord{{node: "a", at: at(100), held: []int{5, 3}}}
	stops := []*stopRecord{{node: "c", at: at(50), cont: at(900)}}
	var res Result
	analyze(&res, jobs, accepted, kills, stops, nil)

	if got, want := res.Accepted, 7; got != want {
		t.Errorf("accepted = %d, want %d", got, want)
	}
	if got, want := res.Delivered, 6; got != want {
		t.Errorf("delivered = %d, want %d", got, want)
	}
	if got, want := res.Lost, 1; got != want || !slices.Equal(res.LostSeqs, []int{4}) {
		t.Errorf("lost = %d %v, want %d [4]", got, res.LostSeqs, want)
	}
	if got, want := res.Duplicates, 2; got != want {
		t.Errorf("duplicates = %d, want %d", got, want)
	}
	if got, want := res.DuplicatesAfterSuccess, 1; got != want {
		t.Errorf("duplicates after success = %d, want %d", got, want)
	}
	if got, want := res.Retries, 1; got != want {
		t.Errorf("retries = %d, want %d", got, want)
	}
	if got, want := res.DeliveredUnaccepted, 1; got != want {
		t.Errorf("delivered_unaccepted = %d, want %d", got, want)
	}
	if res.InFlightAtKills == nil || *res.InFlightAtKills != 1 {
		t.Errorf("in_flight_at_kills = %v, want 1", res.InFlightAtKills)
	}
	// The first delivery by another node after the kill: job 6 at 2000
	// ms; c's at 1000 ms, after its SIGCONT, is no takeover.
	if res.FailoverMS == nil || res.FailoverMS.N != 1 || res.FailoverMS.Max != 1900 {
		t.Errorf("failover_ms = %+v, want one of 1900", res.FailoverMS)
	}
	// Held: 1 (open) and 5 (grabbed); 3 was done before the kill.
	if res.RedeliveryMS == nil || res.RedeliveryMS.Max != 3900 {
		t.Errorf("redelivery_ms = %+v, want max 3900", res.RedeliveryMS)
	}
	if res.NotRedelivered == nil || *res.NotRedelivered != 0 {
		t.Errorf("not_redelivered = %v, want 0", res.NotRedelivered)
	}
}

// TestAnalyze_StaleAfterCont: a job the stopped node held at the SIGSTOP
// is stale when the node delivered it after its SIGCONT although another
// node had delivered it since the SIGSTOP; a later delivery by another
// node is a duplicate, and a job the node did not hold at the SIGSTOP (it
// delivered it again as the leader after another node failed with it) is
// no stale delivery.
func TestAnalyze_StaleAfterCont(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ok := func(by string, s int) delivery { return delivery{at: at(s), end: at(s), by: by, outcome: success} }
	jobs := [][]delivery{
		{ok("b", 15), ok("a", 31)},                                     // held, grabbed: b took it over; a delivered it after SIGCONT: stale
		{ok("a", 31), ok("b", 40)},                                     // held: a first, b later: a duplicate
		{ok("b", 50), ok("a", 55)},                                     // not held at the stop: b was stopped with it, a delivered it again
		{{at: at(9), by: "a", outcome: cut}, ok("b", 12), ok("a", 30)}, // open at the worker at the stop: stale
		{ok("a", 5), ok("b", 12)},                                      // delivered before the stop, again by b: a duplicate
	}
	stops := []*stopRecord{{node: "a", at: at(10), cont: at(30), held: []int{0, 1}}}
	var res Result
	analyze(&res, jobs, []bool{true, true, true, true, true}, nil, stops, nil)
	if res.StaleAfterCont == nil || *res.StaleAfterCont != 2 {
		t.Errorf("stale_after_cont = %v, want 2", res.StaleAfterCont)
	}
}

func TestAnalyze_NamesWhatWasNotMeasured(t *testing.T) {
	t.Parallel()
	var res Result
	analyze(&res, [][]delivery{{{at: time.Now(), end: time.Now(), by: "a", outcome: success}}}, []bool{true}, nil, nil, nil)
	if res.FailoverMS != nil || res.InFlightAtKills != nil {
		t.Errorf("failover measured without a kill: %+v", res)
	}
	if len(res.NotMeasured) != 3 {
		t.Errorf("not_measured = %q, want kills, stops and database faults named", res.NotMeasured)
	}
}

// TestAnalyze_DBGap: per database fault, the longest time without a
// delivery from its start to DBGapAfter after its end, cut at the run's
// last delivery; db_resume_ms from its end to the next delivery.
func TestAnalyze_DBGap(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok := func(ms int) delivery { return delivery{at: at(ms), end: at(ms), by: "a", outcome: success} }
	jobs := [][]delivery{{ok(500)}, {ok(1200)}, {ok(4200)}, {ok(4300)}, {ok(6000), ok(8000)}, {ok(10000)}, {ok(12000)}, {ok(14500)},
		{ok(30000)}, {ok(31000)}, {ok(33000)}}
	accepted := slices.Repeat([]bool{true}, len(jobs))
	faults := []*dbFaultRecord{
		{at: at(1000), done: at(4000)},                 // 1200 → 4200: 3000
		{at: at(20000), done: at(21000), failed: true}, // 20000 → 30000 (the window ends at 31000): 10000
		{at: at(32000), done: at(32500)},               // 32000 → 33000, cut at the last delivery
	}
	var res Result
	analyze(&res, jobs, accepted, nil, nil, faults)
	if res.DBGapMS == nil || !slices.Equal(res.DBGapMS.Each, []int64{3000, 10000, 1000}) {
		t.Errorf("db_gap_ms = %+v, want each [3000 10000 1000]", res.DBGapMS)
	}
	if res.DBResumeMS == nil || !slices.Equal(res.DBResumeMS.Each, []int64{200, 9000, 500}) {
		t.Errorf("db_resume_ms = %+v, want each [200 9000 500]", res.DBResumeMS)
	}
	if res.DBFaults != 3 || res.DBFaultErrors != 1 {
		t.Errorf("db_faults %d, db_fault_errors %d; want 3, 1", res.DBFaults, res.DBFaultErrors)
	}
}

// TestCheckIDs: an accepted job is a mismatch when a delivery carried
// another id than the one its enqueue was answered; jobs not accepted or
// never delivered are not checked.
func TestCheckIDs(t *testing.T) {
	t.Parallel()
	d := func(id int64) delivery { return delivery{id: id, outcome: success} }
	jobs := [][]delivery{
		{d(10)},        // matches
		{d(11), d(11)}, // delivered twice, same id
		{d(99)},        // another id: the id of another job's row
		{d(13), d(98)}, // once right, once under another id
		{},             // never delivered
		{d(77)},        // not accepted: no id answered
	}
	accepted := []bool{true, true, true, true, true, false}
	answered := []int64{10, 11, 12, 13, 14, 0}
	var res Result
	checkIDs(&res, jobs, accepted, answered)
	if res.IDsChecked != 4 || res.IDMismatches != 2 || !slices.Equal(res.IDMismatchSeqs, []int{2, 3}) {
		t.Errorf("ids_checked %d, id_mismatches %d %v; want 4, 2 [2 3]", res.IDsChecked, res.IDMismatches, res.IDMismatchSeqs)
	}
}

func TestLockCheck_DoubleHold(t *testing.T) {
	t.Parallel()
	lc := &lockCheck{}
	now := time.Now()
	if !lc.enter(1, now.Add(time.Second)) {
		t.Fatal("token 1 refused")
	}
	// Token 2 enters while token 1's lease is valid and not released.
	if !lc.enter(2, now.Add(time.Second)) {
		t.Fatal("token 2 refused")
	}
	lc.write(1, now.Add(time.Second)) // the older holder writes on
	lc.leave(2)
	if lc.enter(1, now.Add(time.Second)) {
		t.Error("stale token 1 entered after token 2")
	}
	// Token 3 enters after token 2 left: no double hold.
	lc.enter(3, now.Add(time.Second))
	if got, want := lc.res.DoubleHolds, 1; got != want {
		t.Errorf("double holds = %d, want %d", got, want)
	}
	if got, want := lc.res.StaleRejected, 2; got != want {
		t.Errorf("stale rejected = %d, want %d", got, want)
	}
}

// TestLockCheck_TokensNotIncreasing: an acquire must return a token above
// every token returned before it was sent; one returned late (its node
// was stopped) after a higher one is no fault, as it was granted earlier.
func TestLockCheck_TokensNotIncreasing(t *testing.T) {
	t.Parallel()
	lc := &lockCheck{}
	before := lc.lastHandedOut()
	lc.acquired(5, before)
	lc.acquired(6, lc.lastHandedOut())
	lc.acquired(4, before) // sent before token 5 was returned
	if got := lc.res.TokensNotIncreasing; got != 0 {
		t.Fatalf("tokens not increasing = %d after tokens granted in order, want 0", got)
	}
	lc.acquired(6, lc.lastHandedOut()) // the counter stood still
	lc.acquired(3, lc.lastHandedOut()) // or went back
	if got, want := lc.res.TokensNotIncreasing, 2; got != want {
		t.Errorf("tokens not increasing = %d, want %d", got, want)
	}
	if got, want := lc.res.Acquisitions, 5; got != want {
		t.Errorf("acquisitions = %d, want %d", got, want)
	}
}

// TestResult_Failed names each broken guarantee.
func TestResult_Failed(t *testing.T) {
	t.Parallel()
	ok := Result{Drained: true, Lock: &LockResult{}, Schedule: &ScheduleResult{}}
	if err := ok.Failed(); err != nil {
		t.Fatalf("Failed of a clean run = %v", err)
	}
	bad := ok
	bad.Lock = &LockResult{TokensNotIncreasing: 1}
	bad.RefusedWithoutRetryAfter = 2
	bad.IDMismatches = 3
	bad.Reaps = &ReapResult{Killed: 5, CutOff: 1, Live: 4}
	err := bad.Failed()
	for _, want := range []string{"fencing tokens", "2 enqueues refused without Retry-After", "3 jobs delivered under another id", "4 reaps of a live node"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Failed = %v, want %q named", err, want)
		}
	}
	fine := ok
	fine.Reaps = &ReapResult{Killed: 5, Stopped: 1, CutOff: 2}
	if err := fine.Failed(); err != nil {
		t.Errorf("Failed of a run whose reaps were all of gone nodes = %v", err)
	}
}

// TestValidate_StopsMustNotOverlap: a stop that lasts as long as the
// spacing of faults would overlap the next fault; the error names the flag.
func TestValidate_StopsMustNotOverlap(t *testing.T) {
	o := Options{Exe: "rowq", DatabaseURL: "sqlite://x.db", Nodes: 3, Rate: 100, Duration: time.Minute,
		MaxWorkers: 10, Faults: []string{FaultStop}, Every: 4 * time.Second, StopFor: 5 * time.Second}
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "stop-for:") {
		t.Fatalf("Validate = %v, want an error naming stop-for", err)
	}
	o.StopFor = 3 * time.Second
	if err := o.Validate(); err != nil && strings.Contains(err.Error(), "stop-for:") {
		t.Errorf("Validate with a 3 s stop every 4 s = %v, want no stop-for error", err)
	}
}

// TestValidate_Keys: a negative count of keys, or a key limit out of
// range with keys, is refused naming the flag; no keys need no limit.
func TestValidate_Keys(t *testing.T) {
	o := Options{Exe: "rowq", DatabaseURL: "sqlite://x.db", Nodes: 3, Rate: 100, Duration: time.Minute,
		MaxWorkers: 10, Faults: []string{FaultKill}, Every: 4 * time.Second, JobTimeout: time.Second}
	for _, c := range []struct {
		keys, limit int
		want        string // "" for valid
	}{
		{0, 0, ""},
		{5, 1, ""},
		{-1, 1, "keys:"},
		{5, 0, "key-limit:"},
		{5, 10001, "key-limit:"},
	} {
		o.Keys, o.KeyLimit = c.keys, c.limit
		err := o.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Validate with %d keys, limit %d = %v, want nil", c.keys, c.limit, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Validate with %d keys, limit %d = %v, want an error naming %s", c.keys, c.limit, err, c.want)
		}
	}
}

// TestValidate_NodeDatabaseURLs: a node's URL must be a database of the
// run's kind; the error names the flag.
func TestValidate_NodeDatabaseURLs(t *testing.T) {
	o := Options{Exe: "rowq", DatabaseURL: "mysql://root@h1/db", Nodes: 3, Rate: 100, Duration: time.Minute,
		MaxWorkers: 10, Faults: []string{FaultKill}, Every: 4 * time.Second, JobTimeout: time.Second}
	for _, c := range []struct {
		urls []string
		ok   bool
	}{
		{[]string{"mysql://root@h1/db", "mysql://root@h2/db"}, true},
		{[]string{"mysql://root@h1/db", "postgres://h2/db"}, false},
		{[]string{"h2:3306/db"}, false},
	} {
		o.NodeDatabaseURLs = c.urls
		err := o.Validate()
		if c.ok && err != nil || !c.ok && (err == nil || !strings.Contains(err.Error(), "node-database-url:")) {
			t.Errorf("Validate with node URLs %q = %v, want ok %v", c.urls, err, c.ok)
		}
	}
	o.DatabaseURL, o.NodeDatabaseURLs = "postgresql://h1/db", []string{"postgres://h2/db"}
	if err := o.Validate(); err != nil {
		t.Errorf("Validate with postgresql:// and postgres:// = %v, want nil", err)
	}
}
