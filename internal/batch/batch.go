// Package batch groups concurrent calls into one: while one batch runs, the
// calls that arrive wait and go together into the next. rowq uses it for
// group commit (many enqueue requests, one multi-row INSERT and one commit)
// and for acknowledging many deliveries with one DELETE.
//
// One batch runs at a time. More would start each batch as soon as its
// first call arrived, so under load every batch would be small: with four
// at a time, MariaDB saw two jobs per INSERT and SQLite's single writer
// turned the others away; with one, batches grow with the load and the
// end-to-end rate rose by a quarter on MariaDB and by half on SQLite
// (docs/benchmarks-log.md, 2026-11-22, 59539a3).
//
// A batcher may also space its batches (gap): a batch then starts no
// sooner than gap after the previous one started, unless Flush or Close
// cuts the wait short. Spacing trades the calls' latency for fewer, larger
// batches; rowq spaces acknowledgements, which no client waits for.
package batch

import (
	"context"
	"errors"
	"sync"
	"time"
)

// batchTimeout bounds one batch, so a database that hangs fails the waiting
// calls instead of holding them forever.
const batchTimeout = 30 * time.Second

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("batcher closed")

// Func runs one batch. It returns one result per item, in order, or an
// error for the whole batch.
type Func[T, R any] func(ctx context.Context, items []T) ([]R, error)

// Batcher groups concurrent Do calls into calls of its Func.
type Batcher[T, R any] struct {
	fn        Func[T, R]
	max       int
	gap       time.Duration
	calls     chan *call[T, R]
	flush     chan struct{}
	done      chan struct{}
	stopped   chan struct{} // loop has returned
	closeOnce sync.Once
}

type call[T, R any] struct {
	item T
	res  R
	err  error
	done chan struct{}          // closed when the batch ran (Do)
	then func(res R, err error) // called instead when the batch ran (Go)
}

// New starts a batcher whose batches hold at most max items and start at
// least gap apart (0: as soon as the previous one ends).
func New[T, R any](fn Func[T, R], max int, gap time.Duration) *Batcher[T, R] {
	b := &Batcher[T, R]{
		fn: fn, max: max, gap: gap,
		calls: make(chan *call[T, R], max), flush: make(chan struct{}, 1),
		done: make(chan struct{}), stopped: make(chan struct{}),
	}
	go b.loop()
	return b
}

// Flush starts the next batch without waiting for the rest of the gap.
func (b *Batcher[T, R]) Flush() {
	select {
	case b.flush <- struct{}{}:
	default:
	}
}

// Do adds item to the next batch and waits for that batch's result. When ctx
// ends first, Do returns ctx's error; the item may still be written.
func (b *Batcher[T, R]) Do(ctx context.Context, item T) (R, error) {
	c := &call[T, R]{item: item, done: make(chan struct{})}
	var zero R
	select {
	case <-b.done:
		return zero, ErrClosed
	default:
	}
	select {
	case b.calls <- c:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-b.done:
		return zero, ErrClosed
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Go adds item to the next batch and returns at once; then is called with
// the item's result once its batch ran, or with ErrClosed after Close.
// then runs on the batcher's goroutine, between batches: it must be
// quick and must not call Do. Go waits only while the batcher's queue is
// full. As with Do, a call that races with Close may be lost: callers
// stop calling Go before they Close (the dispatcher's runners end first).
func (b *Batcher[T, R]) Go(item T, then func(res R, err error)) {
	var zero R
	c := &call[T, R]{item: item, then: then}
	select {
	case <-b.done:
		then(zero, ErrClosed)
		return
	default:
	}
	select {
	case b.calls <- c:
	case <-b.done:
		then(zero, ErrClosed)
	}
}

// Close runs the calls already queued, then stops the batcher.
func (b *Batcher[T, R]) Close() {
	b.closeOnce.Do(func() { close(b.done) })
	<-b.stopped
}

func (b *Batcher[T, R]) loop() {
	defer close(b.stopped)
	batch := make([]*call[T, R], 0, b.max)
	var last time.Time // the previous batch's start
	for {
		batch = batch[:0]
		select {
		case c := <-b.calls:
			batch = append(batch, c)
		case <-b.done:
			// Drain what was queued before Close.
			for {
				select {
				case c := <-b.calls:
					b.run([]*call[T, R]{c})
				default:
					return
				}
			}
		}
		b.space(last)
	fill:
		for len(batch) < b.max {
			select {
			case c := <-b.calls:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		last = time.Now()
		b.run(batch)
	}
}

// space waits until gap has passed since last, a Flush or Close.
func (b *Batcher[T, R]) space(last time.Time) {
	wait := b.gap - time.Since(last)
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-b.flush:
	case <-b.done:
	}
}

func (b *Batcher[T, R]) run(batch []*call[T, R]) {
	items := make([]T, len(batch))
	for i, c := range batch {
		items[i] = c.item
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	res, err := b.fn(ctx, items)
	if err == nil && len(res) != len(items) {
		err = errors.New("batch: result count does not match item count")
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.res = res[i]
		}
		if c.then != nil {
			c.then(c.res, c.err)
		} else {
			close(c.done)
		}
	}
}
