package dispatch

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// History of finished jobs (store/finished.go): the runner writes a
// job's history with its outcome when its queue's keep_finished is more
// than zero, from the settings it holds, at no cost to a queue that keeps
// none; the leader of such a queue prunes what is older, once a minute,
// in batches.

// pruneBatch bounds the rows one prune transaction deletes: short
// transactions that hold few locks, so that enqueues and deliveries go on
// while a large history is pruned.
const pruneBatch = 1000

// pruneMaxBatches bounds the batches one queue's prune runs in a minute's
// upkeep: a history that grows faster is pruned over several minutes
// rather than holding the upkeep.
const pruneMaxBatches = 1000

// pruneLater runs pruneFinished in the background unless one still runs:
// pruning a large history takes seconds to tens of seconds (1,000,000
// rows took 11 s on a quiet machine, 27 s on a loaded one:
// docs/lifecycle.md), which the leadership cycle, and with it the claims
// of new queues and of a dead node's, must not wait for.
func (d *Dispatcher) pruneLater() {
	if !d.pruneBusy.CompareAndSwap(false, true) {
		return
	}
	d.pruning.Add(1)
	go func() {
		defer d.pruning.Done()
		defer d.pruneBusy.Store(false)
		d.pruneFinished()
	}()
}

// pruneFinished deletes, for each queue this node leads that keeps its
// finished jobs, the rows older than its keep_finished.
func (d *Dispatcher) pruneFinished() {
	d.mu.Lock()
	var keep []*store.Queue
	for _, r := range d.runners {
		if q := r.settings.Load(); q != nil && q.KeepFinished > 0 {
			keep = append(keep, q)
		}
	}
	d.mu.Unlock()
	for _, q := range keep {
		n, err := d.pruneQueue(q)
		if n > 0 && d.cfg.Pruned != nil {
			d.cfg.Pruned(n)
		}
		switch {
		case err != nil:
			d.log.Warn("prune finished jobs failed", "queue", q.Name, "pruned", n, "err", err)
		case n > 0:
			d.log.Debug("pruned finished jobs", "queue", q.Name, "pruned", n)
		}
	}
}

// pruneQueue prunes q's history in batches of pruneBatch, each its own
// transaction, until a batch comes back short, and returns how many rows
// it deleted.
func (d *Dispatcher) pruneQueue(q *store.Queue) (int64, error) {
	var total int64
	for range pruneMaxBatches {
		select {
		case <-d.stop:
			return total, nil
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := d.cfg.Store.FinishedPrune(ctx, &store.FinishedPruneParams{
			Queue: q.Name, Age: time.Duration(q.KeepFinished) * time.Second, Limit: pruneBatch,
		})
		cancel()
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
	return total, nil
}

// success is a worker's completion with success (Complete), grouped with
// others into one JobsSucceed: the grab, and the message and result its
// history keeps if its queue keeps finished jobs.
type success struct {
	grab    store.JobGrab
	message string
	result  json.RawMessage
}
