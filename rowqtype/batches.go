package rowqtype

import (
	"encoding/json"
	"time"
)

// Batch is a batch of jobs made by a POST /jobs with "batch"
// (GET /batch/{id}, GET /batches). Pending counts the jobs not yet ended;
// the others are counted by their outcome.
type Batch struct {
	ID        int64     `json:"id"`
	Total     int       `json:"total"`
	Pending   int       `json:"pending"`
	Succeeded int       `json:"succeeded"`
	Failed    int       `json:"failed"`
	Cancelled int       `json:"cancelled"`
	CreatedAt time.Time `json:"created_at"`
	// FinishedAt is when its last job ended; left out while jobs are
	// pending.
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
	Meta       json.RawMessage `json:"meta,omitempty"`
}

// BatchPage is one page of GET /batches, the newest first; NextCursor is
// left out on the last.
type BatchPage struct {
	Batches    []*Batch `json:"batches"`
	NextCursor string   `json:"next_cursor,omitempty"`
}
