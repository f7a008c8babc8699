package batch

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// recorder is a batch func that records each batch's items, answers 10×
// each item, and holds the first batch until release is closed.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	release chan struct{}
}

func newRecorder() *recorder { return &recorder{release: make(chan struct{})} }

func (r *recorder) fn(ctx context.Context, items []int) ([]int, error) {
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(items))
	first := len(r.batches) == 1
	r.mu.Unlock()
	if first {
		<-r.release
	}
	out := make([]int, len(items))
	for i, v := range items {
		out[i] = v * 10
	}
	return out, nil
}

// started waits until n batches have started.
func (r *recorder) started(t *testing.T, n int) {
	t.Helper()
	waitFor(t, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.batches) >= n })
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sizes []int
	for _, b := range r.batches {
		sizes = append(sizes, len(b))
	}
	return sizes
}

// While one batch runs, the calls that arrive go together into the next,
// in one call of fn, and each gets its own result.
func TestCallsArrivingDuringABatchShareTheNext(t *testing.T) {
	rec := newRecorder()
	b := New(rec.fn, 100, 0)
	defer b.Close()

	firstDone := make(chan int)
	go func() {
		r, _ := b.Do(context.Background(), 1)
		firstDone <- r
	}()
	rec.started(t, 1)

	const n = 20
	results := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := b.Do(context.Background(), i+2)
			if err != nil {
				t.Error(err)
			}
			results[i] = r
		})
	}
	waitFor(t, func() bool { return len(b.calls) == n })
	close(rec.release)
	wg.Wait()
	if r := <-firstDone; r != 10 {
		t.Errorf("first call: got %d, want 10", r)
	}
	for i, r := range results {
		if r != (i+2)*10 {
			t.Errorf("call %d: got %d, want %d", i, r, (i+2)*10)
		}
	}
	if sizes, want := rec.sizes(), []int{1, n}; !slices.Equal(sizes, want) {
		t.Errorf("batch sizes %v, want %v: one batch at a time, the waiting calls together", sizes, want)
	}
}

// A batch holds at most max items; the rest wait for the next.
func TestBatchesHoldAtMostMax(t *testing.T) {
	rec := newRecorder()
	b := New(rec.fn, 4, 0)
	defer b.Close()
	var wg sync.WaitGroup
	wg.Go(func() { b.Do(context.Background(), 0) })
	rec.started(t, 1)
	for i := range 4 {
		wg.Go(func() { b.Do(context.Background(), i) })
	}
	waitFor(t, func() bool { return len(b.calls) == 4 })
	// The channel holds max calls; these wait to be let in.
	for i := range 3 {
		wg.Go(func() { b.Do(context.Background(), i) })
	}
	close(rec.release)
	wg.Wait()
	total, sizes := 0, rec.sizes()
	for _, s := range sizes {
		if s > 4 {
			t.Errorf("batch of %d items, max 4 (sizes %v)", s, sizes)
		}
		total += s
	}
	if total != 8 {
		t.Errorf("%d items in batches %v, want 8", total, sizes)
	}
}

// An error of the batch reaches every call in it, and a result count that
// does not match is an error, not a wrong answer.
func TestBatchErrors(t *testing.T) {
	boom := errors.New("boom")
	b := New(func(ctx context.Context, items []int) ([]int, error) { return nil, boom }, 10, 0)
	if _, err := b.Do(context.Background(), 1); !errors.Is(err, boom) {
		t.Errorf("got %v, want %v", err, boom)
	}
	b.Close()
	short := New(func(ctx context.Context, items []int) ([]int, error) { return []int{}, nil }, 10, 0)
	defer short.Close()
	if _, err := short.Do(context.Background(), 1); err == nil {
		t.Error("a batch that answered no result for its item: no error")
	}
}

// Close runs what was queued before it; Do after Close fails with
// ErrClosed; a call whose context ends stops waiting.
func TestCloseAndCancel(t *testing.T) {
	rec := newRecorder()
	b := New(rec.fn, 10, 0)
	var wg sync.WaitGroup
	wg.Go(func() { b.Do(context.Background(), 1) })
	rec.started(t, 1)
	wg.Go(func() {
		if _, err := b.Do(context.Background(), 2); err != nil {
			t.Errorf("queued before Close: %v", err)
		}
	})
	waitFor(t, func() bool { return len(b.calls) == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error)
	go func() { _, err := b.Do(ctx, 3); cancelled <- err }()
	waitFor(t, func() bool { return len(b.calls) == 2 })
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: got %v, want context.Canceled", err)
	}

	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	close(rec.release)
	<-closed
	wg.Wait()
	ran := slices.Concat(rec.batches...)
	slices.Sort(ran)
	// 3 was queued too: a cancelled call may still be written (Do's doc).
	if !slices.Equal(ran, []int{1, 2, 3}) {
		t.Errorf("ran %v, want [1 2 3]", ran)
	}
	if _, err := b.Do(context.Background(), 4); !errors.Is(err, ErrClosed) {
		t.Errorf("Do after Close: got %v, want ErrClosed", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// With a gap, a batch starts no sooner than gap after the previous one,
// so the calls of that time go together; Flush and Close cut the wait.
func TestGapSpacesBatches(t *testing.T) {
	const gap = 300 * time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	var sizes []int
	b := New(func(ctx context.Context, items []int) ([]struct{}, error) {
		mu.Lock()
		starts = append(starts, time.Now())
		sizes = append(sizes, len(items))
		mu.Unlock()
		return make([]struct{}, len(items)), nil
	}, 100, gap)

	began := time.Now()
	b.Do(context.Background(), 0) // the first batch starts at once
	if d := time.Since(began); d >= gap {
		t.Errorf("first batch after %v, want at once", d)
	}
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() { b.Do(context.Background(), i) })
	}
	wg.Wait()
	mu.Lock()
	if len(starts) != 2 || sizes[1] != 5 {
		t.Errorf("batch sizes %v, want [1 5]: the calls within the gap go together", sizes)
	} else if d := starts[1].Sub(starts[0]); d < gap {
		t.Errorf("second batch %v after the first, want at least the gap %v", d, gap)
	}
	mu.Unlock()

	// Flush: the next batch starts without waiting out the gap.
	time.Sleep(gap)
	b.Do(context.Background(), 0)
	flushed := time.Now()
	done := make(chan struct{})
	go func() { b.Do(context.Background(), 1); close(done) }()
	time.Sleep(gap / 10) // most likely waiting out the gap by now; a Flush before that counts too
	b.Flush()
	<-done
	if d := time.Since(flushed); d >= gap {
		t.Errorf("flushed batch ran %v after the previous one, want sooner than the gap %v", d, gap)
	}

	// Close: what is queued runs at once.
	b.Do(context.Background(), 0)
	closing := time.Now()
	go func() { b.Do(context.Background(), 2) }()
	time.Sleep(gap / 10)
	b.Close()
	if d := time.Since(closing); d >= gap {
		t.Errorf("Close took %v, want sooner than the gap %v", d, gap)
	}
}

// Go joins the batches as Do does, and each call's then gets its own
// result, or the batch's error, once its batch ran; after Close, then
// gets ErrClosed at once.
func TestGoCallsBackWithTheResult(t *testing.T) {
	r := newRecorder()
	b := New(r.fn, 10, 0)
	type answer struct{ res, item int }
	got := make(chan answer, 10)
	b.Go(1, func(res int, err error) {
		if err != nil {
			t.Error(err)
		}
		got <- answer{res, 1}
	})
	r.started(t, 1) // 1 alone in the first batch, held
	for i := 2; i <= 4; i++ {
		b.Go(i, func(res int, err error) {
			if err != nil {
				t.Error(err)
			}
			got <- answer{res, i}
		})
	}
	select {
	case a := <-got:
		t.Fatalf("item %d called back before its batch ran", a.item)
	case <-time.After(50 * time.Millisecond):
	}
	close(r.release)
	for range 4 {
		select {
		case a := <-got:
			if a.res != 10*a.item {
				t.Errorf("item %d: result %d, want %d", a.item, a.res, 10*a.item)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a Go call was never called back")
		}
	}
	if sizes := r.sizes(); !slices.Equal(sizes, []int{1, 3}) {
		t.Errorf("batch sizes %v, want [1 3]", sizes)
	}

	boom := errors.New("boom")
	failing := New(func(ctx context.Context, items []int) ([]int, error) { return nil, boom }, 10, 0)
	errs := make(chan error, 1)
	failing.Go(1, func(_ int, err error) { errs <- err })
	if err := <-errs; !errors.Is(err, boom) {
		t.Errorf("then got %v, want %v", err, boom)
	}
	failing.Close()
	failing.Go(2, func(_ int, err error) { errs <- err })
	if err := <-errs; !errors.Is(err, ErrClosed) {
		t.Errorf("Go after Close: then got %v, want ErrClosed", err)
	}
	b.Close()
}
