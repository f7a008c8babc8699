package rowqtype

import "time"

// Queue is a queue's settings, as the queue endpoints answer them.
type Queue struct {
	Name            string `json:"name"`
	PollingInterval int    `json:"polling_interval"` // milliseconds
	MaxWorkers      int    `json:"max_workers"`      // deliveries in flight
	// MaxDispatchesPerSecond and MaxBurstSize throttle the queue; they
	// are left out when it has no throttle.
	MaxDispatchesPerSecond *float64 `json:"max_dispatches_per_second,omitempty"`
	MaxBurstSize           *int     `json:"max_burst_size,omitempty"`
	// Paused queues accept jobs but dispatch none.
	Paused bool `json:"paused"`
	// Delivery is "push" (jobs are POSTed to their url) or "pull"
	// (workers lease them: POST /queue/{name}/lease).
	Delivery string `json:"delivery"`
	// KeepFinished is how long, in seconds, the queue keeps its finished
	// jobs (GET /queue/{name}/finished); left out when 0: it keeps none.
	KeepFinished int `json:"keep_finished,omitempty"`
	// WorkerHosts are, in the answer of GET /queue/{name} only, the worker
	// hosts the queue's leader slows down or holds back; nil when none.
	WorkerHosts []*WorkerHost `json:"worker_hosts,omitempty"`
}

// WorkerHost is a worker host (the host:port of job URLs) that a queue's
// leader slows down after its 429 or 503 answers, or holds back with an
// open circuit breaker after its connection failures (docs/flow-control.md).
type WorkerHost struct {
	Host string `json:"host"`
	// Rate is the dispatches per second the host gets; nil when it is not
	// slowed down.
	Rate *float64 `json:"rate,omitempty"`
	// Breaker is "closed", "open" or "half-open"; Failures counts the
	// host's consecutive connection failures and timeouts.
	Breaker  string `json:"breaker"`
	Failures int    `json:"failures"`
	// OpenUntil is when an open breaker half-opens, by the leader's clock.
	OpenUntil *time.Time `json:"open_until,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`
}

// QueueRequest is the body of PUT /queue/{name}, which creates or
// replaces the queue. A nil field takes the server's configured default,
// except Paused: nil keeps the queue's state, true pauses, false resumes.
type QueueRequest struct {
	PollingInterval        *int     `json:"polling_interval,omitempty"` // milliseconds
	MaxWorkers             *int     `json:"max_workers,omitempty"`
	MaxDispatchesPerSecond *float64 `json:"max_dispatches_per_second,omitempty"`
	MaxBurstSize           *int     `json:"max_burst_size,omitempty"`
	Paused                 *bool    `json:"paused,omitempty"`
	// Delivery is "push" (the default) or "pull".
	Delivery *string `json:"delivery,omitempty"`
	// KeepFinished is how long, in seconds, the queue keeps its finished
	// jobs (0..MaxKeepFinished; absent: 0, none).
	KeepFinished *int `json:"keep_finished,omitempty"`
}

// MaxKeepFinished bounds a queue's keep_finished: 366 days, in seconds.
const MaxKeepFinished = 366 * 24 * 3600

// Node is the rowq node dispatching a queue (GET /queue/{name}/node).
type Node struct {
	ID   string `json:"id"`
	Host string `json:"host"`
}

// Nodes is the answer of GET /nodes: the live rowq nodes of the database,
// ordered by id, and the queues they share.
type Nodes struct {
	Nodes []LiveNode `json:"nodes"`
	// Queues counts every queue, led or not: those no node leads are
	// between a node's death or a move and the next claim.
	Queues int `json:"queues"`
}

// LiveNode is a live rowq node and the number of queues it dispatches.
type LiveNode struct {
	ID        string    `json:"id"`
	Host      string    `json:"host"`
	StartedAt time.Time `json:"started_at"`
	ExpiresAt time.Time `json:"expires_at"`
	Queues    int       `json:"queues"`
}

// WakeRequest is the optional body of POST /queue/{name}/wake, the nudge
// one rowq node sends another that leads the queue.
type WakeRequest struct {
	// Settings says the queue's settings changed: the leader re-reads
	// them now.
	Settings bool `json:"settings,omitempty"`
	// Cancel names a job of the queue that was cancelled: the node aborts
	// its delivery if it runs there.
	Cancel int64 `json:"cancel,omitempty"`
	// Finished names grabs of the queue's jobs whose lease ended on the
	// sending node: the worker slots of pulled jobs come free.
	Finished []LeaseEnd `json:"finished,omitempty"`
}

// LeaseEnd names one grab of a job whose lease ended (WakeRequest).
type LeaseEnd struct {
	ID    int64 `json:"id"`
	Grabs int   `json:"grabs"`
}

// WakeResult is the answer of POST /queue/{name}/wake: Woken tells
// whether this node leads the queue and woke its dispatcher.
type WakeResult struct {
	QueueName string `json:"queue_name"`
	Woken     bool   `json:"woken"`
}

// QueueStats are a queue's statistics, summed over every node
// (GET /queue/{name}/stats; GET /queues/stats maps each queue's name to
// them). docs/api.md says what each field means and how fresh it is.
type QueueStats struct {
	TotalPushes            int64 `json:"total_pushes"`
	TotalPops              int64 `json:"total_pops"`
	TotalSuccesses         int64 `json:"total_successes"`
	TotalFailures          int64 `json:"total_failures"`
	TotalPermanentFailures int64 `json:"total_permanent_failures"`
	TotalCompletes         int64 `json:"total_completes"`
	TotalElapsed           int64 `json:"total_elapsed"` // milliseconds
	// TotalCancels is rowq's: jobs cancelled (POST
	// /queue/{name}/job/{id}/cancel).
	TotalCancels    int64   `json:"total_cancels"`
	PushesPerSecond float64 `json:"pushes_per_second"`
	PopsPerSecond   float64 `json:"pops_per_second"`
	OutstandingJobs int64   `json:"outstanding_jobs"`
	TotalWorkers    int     `json:"total_workers"`
	IdleWorkers     int     `json:"idle_workers"`
	ActiveNodes     int     `json:"active_nodes"`
}
