package dispatch

import (
	"math"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// maxRetryWait bounds every retry delay, whether computed or asked for by
// the worker with retry_after: 30 days, the API's bound on retry_delay.
const maxRetryWait = 30 * 24 * time.Hour

// retryDelay is how long job j waits before its n-th retry (n ≥ 1), given
// rnd drawn uniformly from [0, 1).
//
//	fixed:        d = retry_delay
//	exponential:  d = min(cap, retry_delay · 2^(n-1)), cap = retry_delay_max (30 days if 0)
//	then jitter:  d · (1 + retry_jitter · (2·rnd − 1)), i.e. d ± retry_jitter·d
//
// The result lies within 0..30 days. Every setting comes from the job's
// row, so whichever node delivers the job computes the same range.
func retryDelay(j *store.Job, n int, rnd float64) time.Duration {
	base := time.Duration(j.RetryDelay) * time.Second
	d := base
	if j.RetryBackoff == store.BackoffExponential && n > 1 {
		limit := maxRetryWait
		if j.RetryDelayMax > 0 {
			limit = min(limit, time.Duration(j.RetryDelayMax)*time.Second)
		}
		// Double without overflowing: stop as soon as the cap is reached.
		for i := 1; i < n && d < limit; i++ {
			d *= 2
		}
		d = min(d, limit)
	}
	if j.RetryJitter > 0 {
		d = time.Duration(math.Round(float64(d) * (1 + j.RetryJitter*(2*rnd-1))))
	}
	return min(max(d, 0), maxRetryWait)
}
