// Package testworker is an HTTP worker for rowq's end-to-end tests: it
// records every delivery by request body and answers as the test says.
package testworker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Worker is an httptest worker that records deliveries by request body.
type Worker struct {
	*httptest.Server
	mu         sync.Mutex
	deliveries map[string][]*Delivery // body → its deliveries in arrival order
	arrivals   []string               // every delivery's body, in arrival order
	open       int                    // deliveries not answered yet
	answer     func(body string, attempt int) (status int, resp string, sleep time.Duration)
	// onDelivery, if set, runs with mu held after each delivery is
	// recorded, with the number of distinct bodies delivered so far and of
	// deliveries not answered yet.
	onDelivery func(distinct, open int)
}

// Delivery is one request the worker received.
type Delivery struct {
	At         time.Time
	By         string // User-Agent: the sending node when tests set one per node
	Header     http.Header
	AnsweredAt time.Time // zero if the request ended before the answer
	// Ended is when the worker was done with the request: it answered, or
	// the sender went away (zero while it runs).
	Ended time.Time
}

// New starts a worker that answers each delivery with answer(body, attempt)
// (nil: success at once) and closes it when the test ends.
func New(t testing.TB, answer func(body string, attempt int) (status int, resp string, sleep time.Duration)) *Worker {
	w := &Worker{deliveries: map[string][]*Delivery{}, answer: answer}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body := string(b)
		d := &Delivery{At: time.Now(), By: r.UserAgent(), Header: r.Header.Clone()}
		w.mu.Lock()
		w.deliveries[body] = append(w.deliveries[body], d)
		w.arrivals = append(w.arrivals, body)
		attempt := len(w.deliveries[body])
		w.open++
		if w.onDelivery != nil {
			w.onDelivery(len(w.deliveries), w.open)
		}
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			w.open--
			d.Ended = time.Now()
			w.mu.Unlock()
		}()
		status, resp, sleep := 200, `{"status":"success"}`, time.Duration(0)
		if w.answer != nil {
			status, resp, sleep = w.answer(body, attempt)
		}
		if sleep > 0 {
			select {
			case <-time.After(sleep):
			case <-r.Context().Done():
				return // the node went away: no answer
			}
		}
		w.mu.Lock()
		d.AnsweredAt = time.Now()
		w.mu.Unlock()
		rw.WriteHeader(status)
		io.WriteString(rw, resp)
	}))
	t.Cleanup(w.Close)
	return w
}

// SetOnDelivery sets the hook run after each delivery is recorded.
func (w *Worker) SetOnDelivery(f func(distinct, open int)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onDelivery = f
}

// Of returns copies of body's deliveries.
func (w *Worker) Of(body string) []Delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ds []Delivery
	for _, d := range w.deliveries[body] {
		ds = append(ds, *d)
	}
	return ds
}

// Arrivals returns every delivery's body, in the order they arrived
// (a body delivered twice is in it twice).
func (w *Worker) Arrivals() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.arrivals...)
}

// Count returns how often body was delivered.
func (w *Worker) Count(body string) int { return len(w.Of(body)) }

// Distinct returns how many different bodies were delivered.
func (w *Worker) Distinct() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.deliveries)
}

// Answered counts the bodies with at least one delivery answered.
func (w *Worker) Answered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ds := range w.deliveries {
		for _, d := range ds {
			if !d.AnsweredAt.IsZero() {
				n++
				break
			}
		}
	}
	return n
}

// WaitFor polls cond until it holds or the timeout passes.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// jobGone reports whether the job is no longer stored.
