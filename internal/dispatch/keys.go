package dispatch

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Per-key concurrency and ordering (store.JobOptions.ConcurrencyKey,
// docs/flow-control.md): at most a key's limit of its jobs are in delivery
// at once in the queue, and the jobs of an ordered key go one at a time,
// oldest first. Only the queue's leader starts deliveries, so it keeps the
// counts in memory (keyTable), exact but for what other nodes hold:
//
//   - A grab's keyed jobs (and a hand-off's) are admitted if their key has
//     room; the others are parked: they stay grabbed by this node (so they
//     are extended with its grabs, and a crash gives them back with its
//     other grabs once the grab lease passes) but hold no worker slot and
//     cost no statement, and the grab goes on with other keys' jobs.
//   - When a delivery of a key ends (its outcome recorded), the worker slot
//     it held goes on with the key's next parked job, with no statement
//     between; a key that gets room without a slot in hand is ready, and
//     the run loop starts its jobs in free slots.
//   - An ordered key's job goes only if it is the oldest ordered job of its
//     key still in the queue (store.JobsKeyHeads: one statement for a
//     grab's ordered keys, and one per queue for the keys whose deliveries
//     end at about the same time, Dispatcher.heads): a retried head waits
//     with a later next_try and is still the oldest, so its successors
//     stay parked. The check follows the commit of the predecessor's
//     success, so that a crash never delivers a job again after its
//     successor.
//   - The table is made the first time the runner meets a keyed job, with
//     one statement (store.JobsKeyBusy) counting the keyed jobs other nodes
//     hold and the leases (a worker that accepted a job works on it still):
//     after a takeover, the dead or retired leader's deliveries count
//     against their keys. Those counts, "foreign", are read again every
//     rescue interval while some are left, for this node learns nothing of
//     their ends. A queue that never had a keyed job pays nothing: no
//     table, no statement, one look at each grabbed job's key.
//   - Parked jobs are bounded: a key with keyParkMax parked jobs is left
//     out of the queue's grabs (store.JobsGrabParams.SkipKeys), and with
//     parkMax parked in all, or more than skipKeysMax such keys, every
//     keyed job is (NoKeys), until they drain to half.

// Bounds of the jobs a runner parks.
const (
	keyParkMax  = 1000
	parkMax     = 10000
	skipKeysMax = 100
	// headsMax bounds the keys of one JobsKeyHeads statement.
	headsMax = 500
)

// keyTable is a runner's per-key counts.
type keyTable struct {
	mu   sync.Mutex
	keys map[string]*keyState
	// ready holds the keys that have parked jobs and may have room: the
	// run loop starts their jobs in free worker slots.
	ready map[string]struct{}
	// foreign is the sum of the keys' foreign counts; seq counts this
	// runner's acceptances (keyState.accepted).
	foreign int
	seq     uint64
	// skip holds the keys the grab leaves out (keyParkMax), noKeys that it
	// leaves out every keyed job (parkMax).
	skip   map[string]struct{}
	noKeys bool
	// parked counts the parked jobs, read without the lock.
	parked atomic.Int64
}

// keyState is one key's count.
type keyState struct {
	// busy counts this runner's jobs of the key that hold a key slot:
	// admitted (delivering, or in the read-ahead), or reserved for a head
	// check (checking).
	busy int
	// foreign counts the key's jobs in delivery that this runner does not
	// hold: other nodes' grabs and the leases of accepted jobs
	// (store.JobsKeyBusy).
	foreign int
	// accepted is keyTable.seq when this runner last saw a job of the key
	// accepted: a count read before it may miss that lease.
	accepted uint64
	// checking: parked[0]'s head check runs.
	checking bool
	// parked holds the key's parked jobs, by id.
	parked []*store.Job
}

// keyLimit is j's key's limit: its own (a key's jobs should all give the
// same; when they differ, each job goes only while its key has fewer in
// delivery than its own limit).
func keyLimit(j *store.Job) int {
	if j.Ordered {
		return 1
	}
	return max(j.ConcurrencyLimit, 1)
}

func (t *keyTable) state(k string) *keyState {
	st := t.keys[k]
	if st == nil {
		st = &keyState{}
		t.keys[k] = st
	}
	return st
}

// tidy forgets key k when nothing of it is left to count.
func (t *keyTable) tidy(k string, st *keyState) {
	if st.busy == 0 && st.foreign == 0 && len(st.parked) == 0 && !st.checking {
		delete(t.keys, k)
		delete(t.ready, k)
		delete(t.skip, k)
	}
}

// park adds j to its key's parked jobs.
func (t *keyTable) park(j *store.Job) {
	st := t.state(j.ConcurrencyKey)
	i, _ := slices.BinarySearchFunc(st.parked, j.ID, func(p *store.Job, id int64) int { return cmp.Compare(p.ID, id) })
	st.parked = slices.Insert(st.parked, i, j)
	t.parked.Add(1)
	if len(st.parked) >= keyParkMax {
		t.skip[j.ConcurrencyKey] = struct{}{}
	}
	if t.parked.Load() >= parkMax || len(t.skip) > skipKeysMax {
		t.noKeys = true
	}
}

// unparked notes that n parked jobs of key k (with st its state) left.
func (t *keyTable) unparked(k string, st *keyState, n int) {
	left := t.parked.Add(-int64(n))
	if len(st.parked) <= keyParkMax/2 {
		delete(t.skip, k)
	}
	if t.noKeys && left <= parkMax/2 && len(t.skip) <= skipKeysMax {
		t.noKeys = false
	}
}

// room reports whether key k's parked[0] may go now: an unordered job
// while the key has fewer than its limit in delivery, an ordered one (to
// its head check) while the key has none and no check runs.
func (st *keyState) room() bool {
	if len(st.parked) == 0 || st.checking {
		return false
	}
	j := st.parked[0]
	return st.busy+st.foreign < keyLimit(j)
}

// take takes up to n of key k's parked jobs that may go now, each holding a
// key slot, and, when the next is ordered, reserves it for its head check
// instead (check; it counts in n). The key stays ready while it has more.
func (t *keyTable) take(k string, n int) (jobs []*store.Job, check *store.Job) {
	st := t.keys[k]
	if st == nil {
		delete(t.ready, k)
		return nil, nil
	}
	for n > 0 && st.room() {
		j := st.parked[0]
		st.busy++
		if j.Ordered {
			st.checking = true
			check = j
			break
		}
		st.parked[0] = nil
		st.parked = st.parked[1:]
		jobs = append(jobs, j)
		n--
	}
	if len(jobs) > 0 {
		t.unparked(k, st, len(jobs))
	}
	if !st.room() {
		delete(t.ready, k)
	}
	return jobs, check
}

// checked ends the head check of j: if j is its key's head (and still
// parked), it leaves the parked jobs holding the slot the check reserved,
// and checked reports true; otherwise the slot is given back.
func (t *keyTable) checked(j *store.Job, head bool) bool {
	k := j.ConcurrencyKey
	st := t.state(k)
	st.checking = false
	i := slices.Index(st.parked, j)
	if head && i >= 0 {
		st.parked = slices.Delete(st.parked, i, i+1)
		t.unparked(k, st, 1)
		return true
	}
	st.busy--
	if !head && st.room() {
		// Not the head: it waits until the key's older jobs are gone, which
		// an end here, a grab of the head or the next kick tells.
		delete(t.ready, k)
	} else if st.room() {
		t.ready[k] = struct{}{} // cancelled meanwhile: the next may go
	}
	t.tidy(k, st)
	return false
}

// end frees the key slot of j, whose delivery ended; accepted: it ended
// in a lease, which counts as foreign until a recount finds it gone.
func (t *keyTable) end(j *store.Job, accepted bool) {
	k := j.ConcurrencyKey
	st := t.state(k)
	st.busy--
	if accepted {
		t.seq++
		st.accepted = t.seq
		st.foreign++
		t.foreign++
	}
	if st.room() {
		t.ready[k] = struct{}{}
	}
	t.tidy(k, st)
}

// kick marks ready every key that has parked jobs and room: the safety
// net for the ends this runner is not told of (a cancelled head, a head
// check that failed).
func (t *keyTable) kick() bool {
	for k, st := range t.keys {
		if st.room() {
			t.ready[k] = struct{}{}
		}
	}
	return len(t.ready) > 0
}

// unpark removes the parked job id (cancelled) and returns it, or nil.
func (t *keyTable) unpark(id int64) *store.Job {
	for k, st := range t.keys {
		for i, j := range st.parked {
			if j.ID == id {
				st.parked = slices.Delete(st.parked, i, i+1)
				t.unparked(k, st, 1)
				if st.room() {
					t.ready[k] = struct{}{}
				}
				t.tidy(k, st)
				return j
			}
		}
	}
	return nil
}

// skipped returns what the grab leaves out.
func (t *keyTable) skipped() (keys []string, all bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.noKeys {
		return nil, true
	}
	for k := range t.skip {
		keys = append(keys, k)
	}
	return keys, false
}

// keyTable returns the runner's per-key counts, making them if need be
// (one statement: the keyed jobs in delivery that other nodes hold, or
// that are leased). Jobs this node grabbed before, for a runner of the
// queue that it stopped, count only once that runner is gone: a gap of a
// change of leadership back and forth within one delivery.
func (r *runner) keyTable() (*keyTable, error) {
	if t := r.keys.table.Load(); t != nil {
		return t, nil
	}
	r.keys.mu.Lock()
	defer r.keys.mu.Unlock()
	if t := r.keys.table.Load(); t != nil {
		return t, nil
	}
	busy, err := r.keyBusy()
	if err != nil {
		return nil, err
	}
	t := newKeyTable()
	for k, n := range busy {
		t.state(k).foreign = n
		t.foreign += n
	}
	if t.foreign > 0 {
		r.logger().Info("keyed jobs in delivery beside this node's", "keys", len(busy), "jobs", t.foreign)
	}
	r.keys.table.Store(t)
	return t, nil
}

// admit returns those of jobs (a grab's, or a hand-off) that may start
// now, and parks the other keyed ones. If the key counts cannot be made,
// the keyed jobs are given back to waiting.
func (r *runner) admit(jobs []*store.Job) []*store.Job {
	var keys []string
	for _, j := range jobs {
		if j.ConcurrencyKey != "" && !slices.Contains(keys, j.ConcurrencyKey) {
			keys = append(keys, j.ConcurrencyKey)
		}
	}
	if len(keys) == 0 {
		return jobs
	}
	out := make([]*store.Job, 0, len(jobs))
	t, err := r.keyTable()
	if err == nil && r.stopped() {
		// The queue may have a new leader already, which counted its keys
		// before these jobs were grabbed (a yield, a grab or hand-off that
		// ran when the runner stopped): they go back for it to take.
		err = errStopped
	}
	if err != nil {
		if err != errStopped {
			r.storeErr("count keyed jobs in delivery", err)
		}
		var back []*store.Job
		for _, j := range jobs {
			if j.ConcurrencyKey == "" {
				out = append(out, j)
			} else {
				back = append(back, j)
			}
		}
		if err := r.release(back, false); err != nil {
			r.storeErr("give back keyed jobs", err) // they come back when their grab expires
		}
		r.markBacklog()
		return out
	}
	var checks []*store.Job
	t.mu.Lock()
	for _, j := range jobs {
		if j.ConcurrencyKey == "" {
			out = append(out, j)
		} else {
			t.park(j)
		}
	}
	for _, k := range keys {
		js, c := t.take(k, len(jobs))
		out = append(out, js...)
		if c != nil {
			checks = append(checks, c)
		}
	}
	t.mu.Unlock()
	return append(out, r.checkHeads(t, checks)...)
}

// errStopped is admit's reason to give keyed jobs back: the runner stops.
var errStopped = errors.New("runner stopped")

// checkHeads returns those of jobs (reserved by take) that are the oldest
// job of their key in the queue, and parks the others again.
func (r *runner) checkHeads(t *keyTable, jobs []*store.Job) []*store.Job {
	if len(jobs) == 0 {
		return nil
	}
	heads, err := r.keyHeads(jobs)
	if err != nil {
		// They stay parked; the next kick tries again.
		r.storeErr("find the oldest jobs of ordered keys", err)
	}
	var out []*store.Job
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, j := range jobs {
		if t.checked(j, err == nil && heads[j.ConcurrencyKey] == j.ID) {
			out = append(out, j)
		}
	}
	return out
}

// keyHeads finds the head of each of jobs' keys. The check of one key
// (the end of its delivery: keyEnd) goes with the checks of other keys'
// ends at about the same time, in one statement (Dispatcher.heads).
func (r *runner) keyHeads(jobs []*store.Job) (map[string]int64, error) {
	asks := make([]keyAsk, len(jobs))
	for i, j := range jobs {
		asks[i] = keyAsk{queue: r.name, key: j.ConcurrencyKey}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []int64
	var err error
	if len(asks) == 1 {
		var id int64
		id, err = r.d.heads.Do(ctx, asks[0])
		ids = []int64{id}
	} else {
		ids, err = headsOf(ctx, r.d.cfg.Store, asks)
	}
	if err != nil {
		return nil, err
	}
	heads := make(map[string]int64, len(asks))
	for i, a := range asks {
		heads[a.key] = ids[i]
	}
	return heads, nil
}

// keyAsk is a head check of one key of a queue (Dispatcher.heads).
type keyAsk struct{ queue, key string }

// headsOf answers asks with one JobsKeyHeads per queue among them (per
// headsMax keys): each ask's head, 0 for none.
func headsOf(ctx context.Context, st Deliveries, asks []keyAsk) ([]int64, error) {
	keys := map[string][]string{}
	seen := map[keyAsk]bool{}
	for _, a := range asks {
		if !seen[a] {
			seen[a] = true
			keys[a.queue] = append(keys[a.queue], a.key)
		}
	}
	heads := map[keyAsk]int64{}
	for q, ks := range keys {
		for c := range slices.Chunk(ks, headsMax) {
			got, err := st.JobsKeyHeads(ctx, &store.JobsKeyHeadsParams{Queue: q, Keys: c})
			if err != nil {
				return nil, err
			}
			for k, id := range got {
				heads[keyAsk{q, k}] = id
			}
		}
	}
	out := make([]int64, len(asks))
	for i, a := range asks {
		out[i] = heads[a]
	}
	return out, nil
}

// keyEnd frees the key slot of j, whose delivery ended (accepted: in a
// lease), and, with next, returns the key's next job to deliver in the
// caller's worker slot, or nil.
func (r *runner) keyEnd(j *store.Job, accepted, next bool) *store.Job {
	t := r.keys.table.Load()
	if t == nil {
		return nil
	}
	t.mu.Lock()
	t.end(j, accepted)
	var (
		jobs  []*store.Job
		check *store.Job
	)
	if next {
		jobs, check = t.take(j.ConcurrencyKey, 1)
	}
	ready := len(t.ready) > 0
	t.mu.Unlock()
	if check != nil {
		jobs = r.checkHeads(t, []*store.Job{check})
	}
	if ready {
		r.nudge() // keys with room wait for a free slot
	}
	if len(jobs) > 0 {
		return jobs[0]
	}
	return nil
}

// keyWaits reports whether j's key has jobs parked behind it.
func (r *runner) keyWaits(j *store.Job) bool {
	t := r.keys.table.Load()
	if t == nil || j.ConcurrencyKey == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := t.keys[j.ConcurrencyKey]
	return st != nil && len(st.parked) > 0
}

// keysGone frees the key slots of those of jobs, admitted, that leave
// this runner undelivered (the read-ahead given back).
func (r *runner) keysGone(jobs []*store.Job) {
	t := r.keys.table.Load()
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, j := range jobs {
		if j.ConcurrencyKey != "" {
			t.end(j, false)
		}
	}
}

// keysReady reports whether keys with parked jobs have room.
func (r *runner) keysReady() bool {
	t := r.keys.table.Load()
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ready) > 0
}

// startReady starts the jobs of ready keys in up to free worker slots and
// returns how many it started.
func (r *runner) startReady(free int64) int64 {
	t := r.keys.table.Load()
	took := r.takeSlots(free)
	if t == nil || took == 0 {
		r.releaseSlots(took)
		return 0
	}
	var (
		jobs, checks []*store.Job
		n            = int(took)
	)
	t.mu.Lock()
	for k := range t.ready {
		if n <= 0 {
			break
		}
		js, c := t.take(k, n)
		jobs = append(jobs, js...)
		n -= len(js)
		if c != nil {
			checks = append(checks, c)
			n--
		}
	}
	t.mu.Unlock()
	jobs = append(jobs, r.checkHeads(t, checks)...)
	r.releaseSlots(took - int64(len(jobs)))
	r.deliver(jobs)
	return int64(len(jobs))
}

// parkedJobs returns how many jobs the runner parks.
func (r *runner) parkedJobs() int64 {
	if t := r.keys.table.Load(); t != nil {
		return t.parked.Load()
	}
	return 0
}

// giveBackParked puts the parked jobs back to waiting, as giveBack does
// the read-ahead's: the queue is paused, the node stale, or the runner
// stops.
func (r *runner) giveBackParked() {
	t := r.keys.table.Load()
	if t == nil || t.parked.Load() == 0 {
		return
	}
	var jobs []*store.Job
	t.mu.Lock()
	for k, st := range t.keys {
		// A job under its head check is given back too: the check finds it
		// no longer parked.
		if n := len(st.parked); n > 0 {
			jobs = append(jobs, st.parked...)
			st.parked = nil
			t.unparked(k, st, n)
			t.tidy(k, st)
		}
	}
	t.mu.Unlock()
	if len(jobs) == 0 {
		return
	}
	if err := r.release(jobs, false); err != nil {
		r.storeErr("give back parked jobs", err) // they come back when their grab expires
		return
	}
	r.markBacklog()
}

// recountKeys runs at each rescue of a runner that has met keyed jobs: it
// reads again the keyed jobs in delivery that it does not hold, while it
// counts some (their ends on other nodes, and of leases, are not told
// here), and marks ready the keys with parked jobs and room.
func (r *runner) recountKeys() {
	t := r.keys.table.Load()
	if t == nil {
		return
	}
	t.mu.Lock()
	foreign, seq := t.foreign, t.seq
	t.mu.Unlock()
	if foreign > 0 {
		busy, err := r.keyBusy()
		if err != nil {
			r.storeErr("count keyed jobs in delivery", err)
		} else {
			t.mu.Lock()
			for k, n := range busy {
				if st := t.state(k); st.accepted <= seq {
					t.foreign += n - st.foreign
					st.foreign = n
				}
			}
			for k, st := range t.keys {
				if _, ok := busy[k]; !ok && st.accepted <= seq {
					t.foreign -= st.foreign
					st.foreign = 0
					t.tidy(k, st)
				}
			}
			t.mu.Unlock()
		}
	}
	t.mu.Lock()
	ready := t.kick()
	t.mu.Unlock()
	if ready {
		r.nudge()
	}
}

// keysLeaseEnded tells that a lease of the queue ended (a push worker's
// accepted job, completed, failed, cancelled or run out): while the
// runner counts leases against keys, its run loop counts them again at
// once instead of at its next rescue. A count read again is the
// database's, so an end told twice, or told and read, is not counted
// twice.
func (r *runner) keysLeaseEnded() {
	t := r.keys.table.Load()
	if t == nil {
		return
	}
	t.mu.Lock()
	foreign := t.foreign
	t.mu.Unlock()
	if foreign > 0 {
		r.keys.recount.Store(true)
		r.nudge()
	}
}

// unparkCancelled drops a cancelled job from the parked ones, and reports
// whether it was parked.
func (r *runner) unparkCancelled(id int64) bool {
	t := r.keys.table.Load()
	if t == nil || t.parked.Load() == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unpark(id) != nil
}

func newKeyTable() *keyTable {
	return &keyTable{keys: map[string]*keyState{}, ready: map[string]struct{}{}, skip: map[string]struct{}{}}
}

// keyBusy counts the keyed jobs of the queue in delivery that this node
// does not hold (store.JobsKeyBusy).
func (r *runner) keyBusy() (map[string]int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.d.cfg.Store.JobsKeyBusy(ctx, &store.JobsKeyBusyParams{Queue: r.name, Node: r.d.cfg.Node})
}

// keyRoom is a runner's per-key state: the table of keys, made when the
// runner meets its first keyed job, and whether to count them again.
type keyRoom struct {
	// table counts the keyed jobs in delivery and holds the parked ones;
	// nil until the runner meets a keyed job. mu orders its making.
	table atomic.Pointer[keyTable]
	mu    sync.Mutex
	// recount: a lease ended; count the keys' jobs in delivery again
	// (keysLeaseEnded).
	recount atomic.Bool
}
