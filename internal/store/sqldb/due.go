package sqldb

import (
	"database/sql"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// ScanQueueDue scans a row of a queue's name and the microseconds until
// its earliest waiting job is due and its earliest grab or lease runs out
// (NULL: none), as store.JobsNextDue answers.
func ScanQueueDue(row Scanner) (store.QueueDue, error) {
	var d store.QueueDue
	var job, expiry sql.NullInt64
	if err := row.Scan(&d.Queue, &job, &expiry); err != nil {
		return d, err
	}
	d.Job, d.Expiry = micros(job), micros(expiry)
	return d, nil
}

func micros(v sql.NullInt64) time.Duration {
	if !v.Valid {
		return store.Never
	}
	return time.Duration(v.Int64) * time.Microsecond
}
