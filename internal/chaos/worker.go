package chaos

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// outcome is how the worker ended a delivery.
type outcome uint8

const (
	open    outcome = iota // not answered yet
	success                // answered {"status":"success"}
	fault                  // an injected failure: garbage, 500, reset, or hung past the job's timeout
	cut                    // the node went away before the worker answered
)

// delivery is one request the worker received.
type delivery struct {
	at, end time.Time // arrival; answer (or cut); end is zero while open
	by      string    // User-Agent: the delivering node's id
	id      int64     // Rowq-Job-Id: the job's id as the node read it
	outcome outcome
}

// workerFaults are the misbehaviours of a worker fault, in the order they
// take turns.
var workerFaults = []string{"hang", "garbage", "http500", "slow", "reset"}

// worker is the checking worker: it records every delivery of the load's
// jobs (payload {"seq": n}) with the node that made it and the job id it
// carried, and misbehaves on
// every third delivery while a worker fault lasts. Deliveries of the
// schedule's jobs (path /tick) are counted apart.
type worker struct {
	jobTimeout time.Duration // the jobs' timeout: a hang outlasts it
	workTime   time.Duration // how long a normal delivery takes

	mu         sync.Mutex
	jobs       [][]*delivery // by seq
	ticks      int           // deliveries of the schedule's jobs
	faultUntil time.Time
	faultSeen  int            // deliveries seen while a fault lasted
	injected   map[string]int // misbehaviours by kind
	strays     int            // deliveries whose payload is not one of the load's
	// firsts are the first deliveries since the last takeFirsts, kept
	// only when keepFirsts is set (a soak samples their latency).
	keepFirsts bool
	firsts     []firstDelivery

	srv *http.Server
	url string
}

func newWorker(jobs int, jobTimeout, workTime time.Duration, keepFirsts bool) (*worker, error) {
	w := &worker{jobTimeout: jobTimeout, workTime: workTime, jobs: make([][]*delivery, jobs), injected: map[string]int{},
		keepFirsts: keepFirsts}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	w.url = "http://" + ln.Addr().String()
	w.srv = &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second}
	go w.srv.Serve(ln)
	return w, nil
}

func (w *worker) close() { w.srv.Close() }

// faultFor makes the worker misbehave on every third delivery for d.
func (w *worker) faultFor(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.faultUntil = time.Now().Add(d)
}

func (w *worker) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(r.Body)
	if r.URL.Path == "/tick" {
		w.mu.Lock()
		w.ticks++
		w.mu.Unlock()
		io.WriteString(rw, `{"status":"success"}`)
		return
	}
	var p struct {
		Seq *int `json:"seq"`
	}
	w.mu.Lock()
	if json.Unmarshal(body, &p) != nil || p.Seq == nil || *p.Seq < 0 || *p.Seq >= len(w.jobs) {
		w.strays++
		w.mu.Unlock()
		io.WriteString(rw, `{"status":"permanent-failure","message":"not a chaos job"}`)
		return
	}
	id, _ := strconv.ParseInt(r.Header.Get("Rowq-Job-Id"), 10, 64)
	d := &delivery{at: now, by: r.UserAgent(), id: id}
	if w.keepFirsts && len(w.jobs[*p.Seq]) == 0 {
		w.firsts = append(w.firsts, firstDelivery{seq: *p.Seq, at: now})
	}
	w.jobs[*p.Seq] = append(w.jobs[*p.Seq], d)
	kind := ""
	if now.Before(w.faultUntil) {
		if w.faultSeen%3 == 0 {
			kind = workerFaults[w.faultSeen/3%len(workerFaults)]
			w.injected[kind]++
		}
		w.faultSeen++
	}
	w.mu.Unlock()

	end := func(o outcome) {
		w.mu.Lock()
		d.end, d.outcome = time.Now(), o
		w.mu.Unlock()
	}
	sleep := func(t time.Duration) bool {
		select {
		case <-time.After(t):
			return true
		case <-r.Context().Done():
			return false
		}
	}
	switch kind {
	case "hang":
		sleep(w.jobTimeout + time.Second)
		end(fault)
		return
	case "garbage":
		end(fault)
		io.WriteString(rw, "<html>this is not the worker you are looking for")
		return
	case "http500":
		end(fault)
		rw.WriteHeader(http.StatusInternalServerError)
		io.WriteString(rw, "internal server error")
		return
	case "reset":
		end(fault)
		if h, ok := rw.(http.Hijacker); ok {
			if conn, _, err := h.Hijack(); err == nil {
				if tc, ok := conn.(*net.TCPConn); ok {
					tc.SetLinger(0) // RST, not FIN
				}
				conn.Close()
			}
		}
		return
	case "slow":
		if !sleep(w.jobTimeout / 2) {
			end(cut)
			return
		}
	default:
		if w.workTime > 0 && !sleep(w.workTime) {
			end(cut)
			return
		}
	}
	end(success)
	io.WriteString(rw, `{"status":"success"}`)
}

// snapshot returns copies of every job's deliveries, the schedule's
// deliveries, the misbehaviours injected and the stray deliveries.
func (w *worker) snapshot() (jobs [][]delivery, ticks int, injected map[string]int, strays int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	jobs = make([][]delivery, len(w.jobs))
	for i, ds := range w.jobs {
		for _, d := range ds {
			jobs[i] = append(jobs[i], *d)
		}
	}
	injected = map[string]int{}
	for k, v := range w.injected {
		injected[k] = v
	}
	return jobs, w.ticks, injected, w.strays
}

// takeFirsts returns the first deliveries since the last call.
func (w *worker) takeFirsts() []firstDelivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.firsts
	w.firsts = nil
	return f
}

// succeeded reports whether job seq has a delivery answered success.
func (w *worker) succeeded(seq int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.jobs[seq] {
		if d.outcome == success {
			return true
		}
	}
	return false
}
