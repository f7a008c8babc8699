package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/rowq/rowq/client"
)

// Lock check settings: a short lease, held briefly, so that a run of a
// minute hands the lock over hundreds of times, across the faults.
const (
	lockTTL    = 2 * time.Second
	lockWait   = time.Second
	lockHold   = 30 * time.Millisecond
	lockMargin = 200 * time.Millisecond // kept off the end of a lease
)

// lockCheck runs clients that take one lock through different nodes and,
// while they hold it, write to a shared resource with their fencing token.
// The resource refuses a token older than one it has seen, and counts a
// client entering it while another's lease is valid by that client's own
// reckoning: a lease taken at a0 (when the acquire was sent) lasts at
// least until a0 + ttl, so a client enters and writes only before
// a0 + ttl − margin, and another token entering before then is a double
// hold, never a false one.
type lockCheck struct {
	r    *run
	name string
	wg   sync.WaitGroup

	mu          sync.Mutex
	res         LockResult
	maxToken    int64 // the highest token the resource has seen
	holder      int64 // token inside the resource; 0 for none
	holderValid time.Time
	// handedOut is the highest token an acquire has returned.
	handedOut int64
}

func startLockCheck(ctx context.Context, r *run) *lockCheck {
	lc := &lockCheck{r: r, name: "chaos-" + r.id, res: LockResult{Clients: r.o.LockClients}}
	for i := range r.o.LockClients {
		lc.wg.Go(func() { lc.client(ctx, i) })
	}
	return lc
}

// wait waits for the clients to end (their context ended) and returns
// what they measured; nil when there were none.
func (lc *lockCheck) wait() *LockResult {
	lc.wg.Wait()
	if lc.res.Clients == 0 {
		return nil
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	res := lc.res
	return &res
}

func (lc *lockCheck) client(ctx context.Context, i int) {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		n := lc.r.c.pick()
		if n == nil {
			sleepCtx(ctx, 50*time.Millisecond)
			continue
		}
		// A new owner each time: acquiring again as the same owner would
		// return a lease taken earlier than a0.
		owner := fmt.Sprintf("chaos-client-%d-%d", i, attempt)
		before := lc.lastHandedOut()
		a0 := time.Now()
		l, err := n.api.Acquire(ctx, lc.name, owner, client.AcquireOptions{TTL: lockTTL, Wait: lockWait})
		if err != nil {
			if !client.IsConflict(err) && ctx.Err() == nil {
				lc.count(func(r *LockResult) { r.Errors++ })
				sleepCtx(ctx, 50*time.Millisecond)
			}
			continue
		}
		lc.acquired(l.Token, before)
		valid := a0.Add(lockTTL - lockMargin)
		if lc.enter(l.Token, valid) {
			sleepCtx(ctx, lockHold)
			lc.write(l.Token, valid)
			lc.leave(l.Token)
		}
		// A failed release (the node died) leaves the lease to expire.
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n.api.Release(rctx, l)
		cancel()
	}
}

func (lc *lockCheck) lastHandedOut() int64 {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return lc.handedOut
}

// acquired counts an acquire that returned token, sent when before was
// the highest token handed out: every acquire is granted after those that
// returned before it was sent, so its token must be higher.
func (lc *lockCheck) acquired(token, before int64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.res.Acquisitions++
	if token <= before {
		lc.res.TokensNotIncreasing++
	}
	lc.handedOut = max(lc.handedOut, token)
}

func (lc *lockCheck) count(f func(*LockResult)) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	f(&lc.res)
}

// enter is the first write of a holder: it reports whether the resource
// took it.
func (lc *lockCheck) enter(token int64, valid time.Time) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	now := time.Now()
	if now.After(valid) {
		return false // too late to use the lease
	}
	if token < lc.maxToken {
		lc.res.StaleRejected++
		return false
	}
	if lc.holder != 0 && lc.holder != token && now.Before(lc.holderValid) {
		lc.res.DoubleHolds++
	}
	lc.maxToken, lc.holder, lc.holderValid = token, token, valid
	return true
}

// write is a later write of a holder, made only while its lease is valid.
func (lc *lockCheck) write(token int64, valid time.Time) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if time.Now().After(valid) {
		return
	}
	if token < lc.maxToken {
		lc.res.StaleRejected++
	}
}

func (lc *lockCheck) leave(token int64) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.holder == token {
		lc.holder = 0
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}
