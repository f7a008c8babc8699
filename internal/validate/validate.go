// Package validate holds the checks of rowq's inputs that more than one
// door into rowq uses: names, worker URLs and job requests. The HTTP API
// answers their errors with 400, and the outbox rejects a row with them,
// so that a job is valid, and gets the same defaults, whichever way it
// comes in.
package validate

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rowq/rowq/internal/egress"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/tracing"
	"github.com/rowq/rowq/rowqtype"
)

// Limits of job requests and names.
const (
	MaxNameLen      = 128
	MaxURLLen       = 2048
	MaxRunAfter     = 366 * 24 * 3600 // seconds: a year and a day
	MaxRetries      = 1_000_000
	MaxRetryDelay   = 30 * 24 * 3600 // seconds
	MaxTimeout      = 24 * 3600      // seconds
	MinPriority     = -1000          // lowest job priority
	MaxPriority     = 1000           // highest job priority
	MaxUniqueKeyLen = 255            // characters of a unique_key
	// MaxConcurrencyKeyLen fits a MySQL index of utf8mb4 (191 × 4 bytes).
	MaxConcurrencyKeyLen = 191
	MaxConcurrencyLimit  = 10000 // a key's jobs in delivery at once (max_workers' bound)
	// MaxLeaseMessage bounds a heartbeat's or completion's message, in
	// bytes. It is here, exported, so that the Go client's test can check
	// the client's cut against it: the client itself imports only the
	// standard library, and the Python client keeps its own copy.
	MaxLeaseMessage = 4096
)

// Error is an input that fails a check; its message names the field:
// "max_retries: must be 0..1000000, got -1".
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string { return e.Field + ": " + e.Msg }

func errorf(field, format string, args ...any) error {
	return &Error{Field: field, Msg: fmt.Sprintf(format, args...)}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// Name validates a queue name, job category or other name used in paths.
func Name(field, v string) error {
	switch {
	case v == "":
		return errorf(field, "must not be empty")
	case len(v) > MaxNameLen:
		return errorf(field, "at most %d characters, got %d", MaxNameLen, len(v))
	case !nameRE.MatchString(v) || v == "." || v == "..":
		return errorf(field, "%q: use letters, digits and _ . : - only", v)
	}
	return nil
}

// URL validates a worker URL: absolute http or https with a host,
// allowed by the worker-URL policy (nil: egress's default policy).
func URL(field, v string, urls *egress.Policy) error {
	if v == "" {
		return errorf(field, "required")
	}
	if len(v) > MaxURLLen {
		return errorf(field, "at most %d characters", MaxURLLen)
	}
	u, err := url.Parse(v)
	if err != nil {
		return errorf(field, "not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errorf(field, "scheme must be http or https, got %q", u.Scheme)
	}
	if u.Host == "" {
		return errorf(field, "must name a host")
	}
	if err := urls.CheckURL(u); err != nil {
		return errorf(field, "%v", err)
	}
	return nil
}

// JobURL checks that a job routed to queue has the url its delivery
// needs: a push queue POSTs each job to its url; a pull queue's workers
// lease its jobs, which need none.
func JobURL(url, queue string, pull bool) error {
	if url == "" && !pull {
		return errorf("url", "required: queue %q delivers by push (only the jobs of a pull queue may leave it out)", queue)
	}
	return nil
}

// Range validates an optional integer field against [lo, hi].
func Range(field string, v *int, lo, hi int) error {
	if v != nil && (*v < lo || *v > hi) {
		return errorf(field, "must be %d..%d, got %d", lo, hi, *v)
	}
	return nil
}

// Job checks a job request (the body of POST /job/{category}, an element
// of POST /jobs, a row of the outbox). Durations are seconds. A url left
// out is checked once the job's queue is known (JobURL).
func Job(req *rowqtype.JobRequest, urls *egress.Policy) error {
	if req.URL != "" {
		if err := URL("url", req.URL, urls); err != nil {
			return err
		}
	}
	// A payload's bytes are kept as sent; MySQL and PostgreSQL refuse
	// text that is not UTF-8.
	if !utf8.Valid(req.Payload) {
		return errorf("payload", "must be valid UTF-8")
	}
	for _, c := range []struct {
		field  string
		v      *int
		lo, hi int
	}{
		{"run_after", req.RunAfter, 0, MaxRunAfter},
		{"max_retries", req.MaxRetries, 0, MaxRetries},
		{"retry_delay", req.RetryDelay, 0, MaxRetryDelay},
		{"timeout", req.Timeout, 0, MaxTimeout},
	} {
		if err := Range(c.field, c.v, c.lo, c.hi); err != nil {
			return err
		}
	}
	return jobOptions(req)
}

// jobOptions checks the job settings rowq adds to Fireworq's.
func jobOptions(req *rowqtype.JobRequest) error {
	if err := Range("priority", req.Priority, MinPriority, MaxPriority); err != nil {
		return err
	}
	if k := req.UniqueKey; k != nil {
		if err := UniqueKey(*k); err != nil {
			return err
		}
	}
	backoff := valueOr(req.RetryBackoff, store.BackoffFixed)
	switch backoff {
	case store.BackoffFixed:
		if req.RetryDelayMax != nil {
			return errorf("retry_delay_max", "only with retry_backoff \"exponential\"")
		}
	case store.BackoffExponential:
		if valueOr(req.RetryDelay, 0) < 1 {
			return errorf("retry_delay", "must be 1..%d with retry_backoff \"exponential\" (it is the base), got %d",
				MaxRetryDelay, valueOr(req.RetryDelay, 0))
		}
		if err := Range("retry_delay_max", req.RetryDelayMax, valueOr(req.RetryDelay, 1), MaxRetryDelay); err != nil {
			return err
		}
	default:
		return errorf("retry_backoff", "must be \"fixed\" or \"exponential\", got %q", backoff)
	}
	if j := req.RetryJitter; j != nil && !(*j >= 0 && *j <= 1) {
		return errorf("retry_jitter", "must be 0..1 (a fraction of the delay), got %v", *j)
	}
	if err := Concurrency(req.ConcurrencyKey, req.ConcurrencyLimit, req.Ordered); err != nil {
		return err
	}
	return trace(req.TraceParent, req.TraceState)
}

// Concurrency checks a job's concurrency key, limit and ordering (of a
// job request, or of a schedule's job).
func Concurrency(ckey *string, limit *int, ordered *bool) error {
	if ckey == nil {
		if limit != nil {
			return errorf("concurrency_limit", "only with concurrency_key")
		}
		if ordered != nil && *ordered {
			return errorf("ordered", "only with concurrency_key")
		}
		return nil
	}
	if err := key("concurrency_key", *ckey, MaxConcurrencyKeyLen); err != nil {
		return err
	}
	if err := Range("concurrency_limit", limit, 1, MaxConcurrencyLimit); err != nil {
		return err
	}
	if valueOr(ordered, false) && valueOr(limit, 1) > 1 {
		return errorf("ordered", "only with concurrency_limit 1 (an ordered key's jobs go one at a time), got concurrency_limit %d", *limit)
	}
	return nil
}

// JobKey checks that a job with a concurrency key (ckey, "" for none) is
// routed to a push queue: a pull queue's workers lease its jobs with no
// key limit.
func JobKey(ckey, queue string, pull bool) error {
	if ckey != "" && pull {
		return errorf("concurrency_key", "not on queue %q, which delivers by pull (per-key limits apply to push queues only)", queue)
	}
	return nil
}

// JobQueue checks that a job with url and concurrency key ckey ("" for
// none) may go to queue, which delivers by pull when pull is set: its url
// (JobURL), then its key (JobKey). Every door that routes a job checks
// both, in this order, so that it gets the same answer from each.
func JobQueue(url, ckey, queue string, pull bool) error {
	if err := JobURL(url, queue, pull); err != nil {
		return err
	}
	return JobKey(ckey, queue, pull)
}

// trace checks a job's own trace context. Unlike the headers of a
// request, which a receiver ignores when they are invalid (as W3C Trace
// Context asks: proxies and libraries add them), these fields are the
// client's own request, so an invalid one is refused.
func trace(parent, state *string) error {
	if parent == nil {
		if state != nil {
			return errorf("tracestate", "only with traceparent")
		}
		return nil
	}
	if _, err := tracing.ParseParent(*parent); err != nil {
		return errorf("traceparent", "%v, got %s", err, shown(*parent))
	}
	if state == nil {
		return nil
	}
	if n := len(*state); n > tracing.MaxState {
		return errorf("tracestate", "at most %d characters, got %d", tracing.MaxState, n)
	}
	if _, err := tracing.ParseState(*state); err != nil {
		return errorf("tracestate", "%v", err)
	}
	return nil
}

// shown quotes v for an error message, or gives its length when it is
// too long to repeat.
func shown(v string) string {
	if len(v) > 100 {
		return fmt.Sprintf("%d characters", len(v))
	}
	return fmt.Sprintf("%q", v)
}

// UniqueKey validates a unique_key: 1..255 characters of UTF-8 without
// control characters, not ending in a space (MySQL's collations ignore
// trailing spaces, the other databases do not; refusing them keeps the
// dialects alike).
func UniqueKey(k string) error {
	return key("unique_key", k, MaxUniqueKeyLen)
}

// key validates a key of field (unique_key, concurrency_key): 1..maxLen
// characters of UTF-8 without control characters, not ending in a space.
func key(field, k string, maxLen int) error {
	switch {
	case k == "":
		return errorf(field, "must not be empty (leave it out for none)")
	case !utf8.ValidString(k):
		return errorf(field, "must be valid UTF-8")
	case utf8.RuneCountInString(k) > maxLen:
		return errorf(field, "at most %d characters, got %d", maxLen, utf8.RuneCountInString(k))
	case strings.HasSuffix(k, " "):
		return errorf(field, "must not end with a space")
	case strings.IndexFunc(k, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return errorf(field, "must not contain control characters")
	}
	return nil
}

// JobParams returns the job to insert for a checked request (Job) whose
// category is routed to queue, with the defaults of every field the
// request leaves out. A null payload is no payload, as an absent one.
func JobParams(queue, category string, req *rowqtype.JobRequest) *store.JobInsertParams {
	payload := req.Payload
	if string(payload) == "null" {
		payload = nil
	}
	p := &store.JobInsertParams{
		Queue:      queue,
		Category:   category,
		URL:        req.URL,
		Payload:    payload,
		RunAfter:   time.Duration(valueOr(req.RunAfter, 0)) * time.Second,
		Timeout:    valueOr(req.Timeout, 0),
		MaxRetries: valueOr(req.MaxRetries, 0),
		RetryDelay: valueOr(req.RetryDelay, 0),
		JobOptions: store.JobOptions{
			Priority:      valueOr(req.Priority, 0),
			UniqueKey:     valueOr(req.UniqueKey, ""),
			RetryBackoff:  valueOr(req.RetryBackoff, store.BackoffFixed),
			RetryDelayMax: valueOr(req.RetryDelayMax, 0),
			RetryJitter:   valueOr(req.RetryJitter, 0),
		},
		Trace: jobTrace(req),
	}
	if req.ConcurrencyKey != nil {
		p.ConcurrencyKey = *req.ConcurrencyKey
		p.ConcurrencyLimit = valueOr(req.ConcurrencyLimit, 1)
		p.Ordered = valueOr(req.Ordered, false)
	}
	return p
}

// jobTrace is the trace context of a checked request (Job): its
// traceparent in version 00 form and its tracestate, or none.
func jobTrace(req *rowqtype.JobRequest) store.Trace {
	if req.TraceParent == nil {
		return store.Trace{}
	}
	var tr store.Trace
	tr.Parent, _ = tracing.ParseParent(*req.TraceParent)
	if req.TraceState != nil {
		tr.State, _ = tracing.ParseState(*req.TraceState)
	}
	return tr
}

// valueOr returns *v, or def when v is nil.
func valueOr[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}
