package dispatch

import (
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

func TestRetryDelay_Formula(t *testing.T) {
	t.Parallel()
	exp := func(base, limit int, jitter float64) *store.Job {
		return &store.Job{RetryDelay: base, JobOptions: store.JobOptions{RetryBackoff: store.BackoffExponential, RetryDelayMax: limit, RetryJitter: jitter}}
	}
	for _, tc := range []struct {
		name string
		job  *store.Job
		n    int
		rnd  float64
		want time.Duration
	}{
		{"fixed", &store.Job{RetryDelay: 10}, 5, 0.9, 10 * time.Second},
		{"fixed, empty backoff reads as fixed", &store.Job{RetryDelay: 3, JobOptions: store.JobOptions{RetryBackoff: ""}}, 9, 0, 3 * time.Second},
		{"fixed with jitter, low end", &store.Job{RetryDelay: 10, JobOptions: store.JobOptions{RetryJitter: 0.5}}, 1, 0, 5 * time.Second},
		{"fixed with jitter, middle", &store.Job{RetryDelay: 10, JobOptions: store.JobOptions{RetryJitter: 0.5}}, 1, 0.5, 10 * time.Second},
		{"exponential, first retry is the base", exp(2, 0, 0), 1, 0, 2 * time.Second},
		{"exponential, 4th retry", exp(2, 0, 0), 4, 0, 16 * time.Second},
		{"exponential, capped", exp(2, 60, 0), 10, 0, 60 * time.Second},
		{"exponential, no cap means 30 days", exp(1, 0, 0), 100, 0, 30 * 24 * time.Hour},
		{"exponential, huge n does not overflow", exp(2_592_000, 0, 0), 1_000_000, 0, 30 * 24 * time.Hour},
		{"exponential with jitter, high end", exp(10, 0, 0.2), 2, 1, 24 * time.Second},
		{"jitter never passes 30 days", exp(2_592_000, 0, 1), 3, 0.999, 30 * 24 * time.Hour},
		{"zero delay", exp(0, 0, 1), 7, 0.7, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryDelay(tc.job, tc.n, tc.rnd); got != tc.want {
				t.Fatalf("retryDelay(n=%d, rnd=%v) = %v, want %v", tc.n, tc.rnd, got, tc.want)
			}
		})
	}
}

func TestParseResponse_RetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		want time.Duration // -1: none
	}{
		{`{"status": "failure", "retry_after": 5}`, 5 * time.Second},
		{`{"status": "failure", "retry_after": 0.25}`, 250 * time.Millisecond},
		{`{"status": "failure", "retry_after": 0}`, 0},
		{`{"status": "failure", "retry_after": 99999999}`, 30 * 24 * time.Hour},
		{`{"status": "failure", "retry_after": -3}`, -1},
		{`{"status": "failure", "retry_after": "soon"}`, -1},
		{`{"status": "failure"}`, -1},
	} {
		res := parseResponse(500, []byte(tc.body))
		if res.Status != StatusFailure {
			t.Fatalf("%s: status %q, want failure", tc.body, res.Status)
		}
		got := time.Duration(-1)
		if res.RetryAfter != nil {
			got = *res.RetryAfter
		}
		if got != tc.want {
			t.Errorf("%s: RetryAfter = %v, want %v", tc.body, got, tc.want)
		}
	}
}
