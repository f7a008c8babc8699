// Package rowqtype holds the JSON request and response bodies of rowq's
// HTTP API: jobs and their flows, batches, queues, routings, job and
// failure log listings, stats, locks, schedules, version, health and the
// error body. The server (internal/httpapi) decodes requests into these
// types and encodes its answers from them, and the Go client (package
// client) sends and reads the same types, so the two cannot drift apart.
// It imports only the standard library, as River's rivertype does for
// River.
//
// Answers carry every field the server always sends, zero or not
// ("paused": false); a field tagged omitempty is one the server leaves out
// when it does not apply, such as a job's payload when it has none.
//
// Requests: the server must tell a field left out from one given as zero,
// since it checks ranges and fills in defaults ("max_workers": 0 is an
// error, no max_workers takes the configured default). So an optional
// field is a pointer, tagged omitempty: nil leaves it out. Fields that are
// required, or whose zero value means the same as leaving them out (a
// schedule's "timezone": "" is UTC), are plain values. Counts and
// durations in seconds are int, so that Go 1.26's new(expr) fills a
// pointer field in place, with no helper functions:
//
//	job := &rowqtype.JobRequest{URL: "http://worker/mail", MaxRetries: new(3), RetryDelay: new(60)}
//
// The client takes and returns these types as they are; it keeps no
// builders or copies of its own, so a field added here reaches both sides
// at once.
//
// Durations are seconds in the job, schedule and lock bodies and
// milliseconds in the queue's polling_interval, as on the wire; times are
// RFC 3339 with a zone offset. docs/api.md describes each field.
package rowqtype

// ErrorBody is the body of every JSON answer other than 200: a message
// naming the field at fault, such as "max_workers: must be 1..10000, got 0". A
// lock's 409 carries more (LockConflict).
type ErrorBody struct {
	Error string `json:"error"`
}

// Version is the answer of GET /version.
type Version struct {
	Version string `json:"version"`
}

// Health is the answer of GET /healthz while the database answers:
// Status "ok".
type Health struct {
	Status string `json:"status"`
}
