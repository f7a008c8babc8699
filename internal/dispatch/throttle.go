package dispatch

import (
	"math"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// bucket is a token bucket that bounds a queue's grabs: a job is grabbed
// only with a token; tokens come at rate per second and at most burst are
// kept. It starts full, so an idle throttled queue can take burst jobs at
// once. It is used by one runner goroutine only.
type bucket struct {
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

// defaultBurst is the bucket size when a queue sets a rate but no
// max_burst_size: one second's worth of jobs, and at least one.
func defaultBurst(rate float64) int {
	return max(1, int(math.Ceil(rate)))
}

func newBucket(rate float64, burst int, now time.Time) *bucket {
	return &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: now}
}

func (b *bucket) refill(now time.Time) {
	if now.After(b.last) {
		b.tokens = min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
		b.last = now
	}
}

// available returns how many whole tokens there are now.
func (b *bucket) available(now time.Time) int {
	b.refill(now)
	return int(b.tokens)
}

// take spends n tokens.
func (b *bucket) take(n int) { b.tokens -= float64(n) }

// untilNext returns how long until a whole token is there.
func (b *bucket) untilNext(now time.Time) time.Duration {
	b.refill(now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / b.rate * float64(time.Second))
}

// throttle returns the runner's bucket for the queue's current settings,
// or nil when the queue is not throttled. A change of rate or burst starts
// a new, full bucket.
func (r *runner) throttle(q *store.Queue, now time.Time) *bucket {
	if q.MaxDispatchesPerSecond == nil || *q.MaxDispatchesPerSecond <= 0 {
		r.bucket = nil
		return nil
	}
	rate := *q.MaxDispatchesPerSecond
	burst := defaultBurst(rate)
	if q.MaxBurstSize != nil && *q.MaxBurstSize > 0 {
		burst = *q.MaxBurstSize
	}
	if r.bucket == nil || r.bucket.rate != rate || r.bucket.burst != float64(burst) {
		r.bucket = newBucket(rate, burst, now)
	}
	return r.bucket
}
