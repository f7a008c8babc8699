// Package outbox moves the transactional outbox: applications INSERT rows
// into rowq_outbox inside their own transactions (docs/outbox.md), and one
// node at a time, the live node with the lowest id, turns the committed
// rows into jobs, in batches. Each row is checked, given its defaults and
// routed exactly as POST /job would (internal/validate, the enqueue
// service's routing), and a row that is not a valid job goes to
// rowq_outbox_rejects with the reason instead. A batch's jobs and rejects
// are inserted, and its outbox rows deleted, in one transaction
// (store.OutboxStore.OutboxMove): a mover that dies half-way leaves the
// rows in the outbox for the next one, and none is moved twice.
//
// The mover probes the outbox with one indexed read, every 5 ms after a
// batch that found rows, backing off to PollInterval while it stays empty,
// and to IdlePoll once it has stayed empty for IdleAfter. On PostgreSQL, once the outbox stayed empty that long, it waits instead
// for the notification a trigger on rowq_outbox sends at the commit of an
// insert, which the trigger sends only while the mover waits for one.
package outbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/rowq/rowq/internal/egress"
	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/validate"
	"github.com/rowq/rowq/rowqtype"
)

// Store is what the mover needs of the database: the outbox.
type Store interface {
	store.OutboxStore
}

// LiveNodes tells the live nodes, the lowest of which moves the outbox, as
// this node last read them (*dispatch.Dispatcher reads them in each
// leadership cycle), or nil before the first read. Asking costs the
// database nothing.
type LiveNodes interface {
	LiveNodes() *store.Cluster
}

// Enqueuer is the enqueue service as the mover sees it
// (*enqueue.Service).
type Enqueuer interface {
	// Route finds the queue of a category, and whether it is a pull
	// queue, as POST /job does.
	Route(ctx context.Context, category string) (enqueue.Destination, error)
	// Stored counts jobs committed outside the enqueue service and wakes
	// their queues' dispatchers.
	Stored(ps []*store.JobInsertParams, res []store.JobPushed)
}

// Config configures a Mover.
type Config struct {
	Store   Store
	Enqueue Enqueuer
	Logger  *slog.Logger
	// Node is this node's id, as registered by its dispatcher's
	// heartbeat: the mover moves while it is the lowest live id.
	Node string
	// Nodes tells the live nodes.
	Nodes LiveNodes
	// WorkerURLs is the worker-URL policy jobs' URLs are checked
	// against, as POST /job checks them.
	WorkerURLs *egress.Policy
	// BatchSize bounds the rows of one move (500 when zero).
	BatchSize int
	// PollInterval is the longest wait between two probes of the outbox
	// while it stays empty, where the store cannot announce inserts
	// (50 ms when zero).
	PollInterval time.Duration
	// IdlePoll is the wait between two probes once the outbox has stayed
	// empty for IdleAfter (500 ms and a minute when zero; never shorter
	// than PollInterval): the probes of an outbox that is not used cost
	// little, and a row that ends a quiet minute waits for one.
	IdlePoll  time.Duration
	IdleAfter time.Duration
	// ListenPollInterval is the wait between two probes while the mover
	// listens for the store's announcements (PostgreSQL), the safety net
	// for a lost notification (1 s when zero).
	ListenPollInterval time.Duration
	// CheckInterval is how often a node looks whether it is the lowest
	// live node, and so the one that moves (1 s when zero): the time
	// within which another node takes over once a mover's registration is
	// gone (deleted by a clean stop, reaped when its session ended,
	// expired when it froze).
	CheckInterval time.Duration
}

// minPoll is the wait before the next probe after a batch that found
// rows but not a full batch.
const minPoll = 5 * time.Millisecond

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 500
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 50 * time.Millisecond
	}
	if c.IdlePoll <= 0 {
		c.IdlePoll = 500 * time.Millisecond
	}
	c.IdlePoll = max(c.IdlePoll, c.PollInterval)
	if c.IdleAfter <= 0 {
		c.IdleAfter = time.Minute
	}
	if c.ListenPollInterval <= 0 {
		c.ListenPollInterval = time.Second
	}
	if c.CheckInterval <= 0 {
		c.CheckInterval = time.Second
	}
}

// Mover moves the outbox while this node is the lowest live node.
type Mover struct {
	cfg Config
	log *slog.Logger

	moving atomic.Bool // this node is the one that moves

	once sync.Once
	stop chan struct{}
	done chan struct{}
}

// New returns a Mover; Start it to move.
func New(cfg Config) *Mover {
	cfg.setDefaults()
	return &Mover{cfg: cfg, log: cfg.Logger.With("service", "outbox"), stop: make(chan struct{})}
}

// Start runs the mover until Stop.
func (m *Mover) Start(ctx context.Context) error {
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		m.run(context.WithoutCancel(ctx))
	}()
	return nil
}

// Stop ends the mover after the move in progress (another node takes
// over once this node's registration is deleted, as a clean stop does).
// It is idempotent, and safe if the mover never started.
func (m *Mover) Stop(ctx context.Context) error {
	m.once.Do(func() { close(m.stop) })
	if m.done == nil {
		return nil
	}
	select {
	case <-m.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Moving reports whether this node moves the outbox now.
func (m *Mover) Moving() bool { return m.moving.Load() }

// run looks every CheckInterval whether this node is the lowest live
// node, and moves while it is.
func (m *Mover) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		first := m.first()
		if ctx.Err() != nil {
			return
		}
		if first {
			m.log.Info("moving the outbox")
			m.moving.Store(true)
			m.term(ctx)
			m.moving.Store(false)
			if ctx.Err() != nil {
				return
			}
			m.log.Info("no longer moving the outbox")
		}
		select {
		case <-time.After(m.cfg.CheckInterval):
		case <-ctx.Done():
			return
		}
	}
}

// first reports whether this node is the lowest live node.
func (m *Mover) first() bool {
	c := m.cfg.Nodes.LiveNodes()
	return c != nil && len(c.Nodes) > 0 && c.Nodes[0].ID == m.cfg.Node
}

// term moves the outbox while this node stays the lowest live node, or
// until ctx ends.
func (m *Mover) term(ctx context.Context) {
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wake := make(chan struct{}, 1)
	var listening atomic.Bool
	listenDone := make(chan struct{})
	go func() {
		defer close(listenDone)
		m.listen(tctx, wake, &listening)
	}()
	defer func() {
		cancel()
		<-listenDone
	}()

	checkAt := time.Now().Add(m.cfg.CheckInterval)
	poll := minPoll
	lastRows := time.Now() // when a batch last found rows
	failing := false
	// waiting: the database was told that this mover waits for the
	// announcement of the next commit (store.OutboxWaiting). It says so
	// only once the outbox has stayed empty for a few probes, and takes it
	// back as soon as it finds rows: an announcement serializes the
	// commits that send one (PostgreSQL's NOTIFY), so the applications'
	// transactions pay it only while the outbox is idle.
	waiting := false
	setWaiting := func(ctx context.Context, w bool) bool {
		if err := m.cfg.Store.OutboxWaiting(ctx, w); err != nil {
			m.log.Debug("tell whether the mover waits for announcements", "waiting", w, "err", err)
			return false
		}
		waiting = w
		return true
	}
	defer func() {
		if waiting {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(tctx), 5*time.Second)
			defer cancel()
			setWaiting(ctx, false)
		}
	}()
	for {
		if time.Now().After(checkAt) {
			if !m.first() {
				return
			}
			checkAt = time.Now().Add(m.cfg.CheckInterval)
		}
		n, err := m.moveBatch(tctx)
		if n > 0 {
			lastRows = time.Now()
		}
		if waiting && (n > 0 || !listening.Load()) {
			setWaiting(tctx, false)
		}
		switch {
		case tctx.Err() != nil:
			return
		case err != nil:
			if !failing {
				m.log.Warn("move the outbox", "err", err)
				failing = true
			}
			poll = min(max(2*poll, 100*time.Millisecond), 5*time.Second)
		default:
			if failing {
				m.log.Info("moving the outbox again")
				failing = false
			}
			switch {
			case n == m.cfg.BatchSize:
				continue // more may be there
			case n > 0:
				poll = minPoll
			case listening.Load() && waiting:
				poll = m.cfg.ListenPollInterval
			case listening.Load() && poll >= m.cfg.PollInterval:
				if setWaiting(tctx, true) {
					continue // read once more: a commit just before was not announced
				}
			case time.Since(lastRows) >= m.cfg.IdleAfter:
				poll = min(2*poll, m.cfg.IdlePoll)
			default:
				poll = min(2*poll, m.cfg.PollInterval)
			}
		}
		wait := min(poll, time.Until(checkAt))
		select {
		case <-wake:
		case <-time.After(wait):
		case <-tctx.Done():
			return
		}
	}
}

// listen relays the store's announcements of outbox inserts to wake
// while ctx lasts, and says in listening whether it hears them. A store
// that cannot announce leaves the mover to its probes.
func (m *Mover) listen(ctx context.Context, wake chan struct{}, listening *atomic.Bool) {
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	failing := false
	for {
		err := m.cfg.Store.OutboxListen(ctx, func() {
			listening.Store(true)
			failing = false
			poke() // what committed before LISTEN is read now
		}, poke)
		listening.Store(false)
		if errors.Is(err, errors.ErrUnsupported) || ctx.Err() != nil {
			return
		}
		if !failing {
			m.log.Warn("listen for outbox inserts; probing meanwhile", "err", err)
			failing = true
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return
		}
	}
}

// moveBatch moves up to a batch of committed rows and returns how many it
// read.
func (m *Mover) moveBatch(ctx context.Context) (int, error) {
	rows, err := m.cfg.Store.OutboxRead(ctx, m.cfg.BatchSize)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	p := &store.OutboxMoveParams{}
	for _, r := range rows {
		job, reason, err := m.check(ctx, r)
		switch {
		case err != nil:
			return 0, err
		case reason != "":
			p.Rejects = append(p.Rejects, store.OutboxRejectParams{Row: r, Reason: reason})
		default:
			p.Jobs = append(p.Jobs, store.OutboxJob{OutboxID: r.ID, Job: job})
		}
	}
	if err := m.move(ctx, p, rows); err != nil {
		return 0, err
	}
	return len(rows), nil
}

// move moves p in one transaction. If the database refuses it for a
// reason other than being away, each row is moved alone, and a job the
// database refuses alone becomes a reject with the database's reason:
// a bad row must not hold up the outbox.
func (m *Mover) move(ctx context.Context, p *store.OutboxMoveParams, rows []*store.OutboxRow) error {
	err := m.moveOnce(ctx, p)
	if err == nil || errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil || len(p.Jobs)+len(p.Rejects) == 1 {
		return err
	}
	m.log.Warn("outbox batch refused; moving its rows one by one", "rows", len(p.Jobs)+len(p.Rejects), "err", err)
	for _, r := range p.Rejects {
		if err := m.moveOnce(ctx, &store.OutboxMoveParams{Rejects: []store.OutboxRejectParams{r}}); err != nil {
			return err
		}
	}
	for _, j := range p.Jobs {
		err := m.moveOnce(ctx, &store.OutboxMoveParams{Jobs: []store.OutboxJob{j}})
		if err == nil || errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			if err != nil {
				return err
			}
			continue
		}
		row := rowOf(rows, j.OutboxID)
		reason := "the database refused the job: " + err.Error()
		if err := m.moveOnce(ctx, &store.OutboxMoveParams{Rejects: []store.OutboxRejectParams{{Row: row, Reason: reason}}}); err != nil {
			return err
		}
	}
	return nil
}

// rowOf returns the row of rows whose id is id.
func rowOf(rows []*store.OutboxRow, id int64) *store.OutboxRow {
	for _, r := range rows {
		if r.ID == id {
			return r
		}
	}
	panic(fmt.Sprintf("outbox row %d is not in its batch", id))
}

// moveOnce moves p with one OutboxMove, then counts its jobs and wakes
// their queues.
func (m *Mover) moveOnce(ctx context.Context, p *store.OutboxMoveParams) error {
	for i := range p.Rejects {
		p.Rejects[i].Reason = truncate(p.Rejects[i].Reason, store.OutboxReasonMax)
	}
	moved, err := m.cfg.Store.OutboxMove(ctx, p)
	if err != nil {
		return err
	}
	if len(moved.Jobs) > 0 {
		m.cfg.Enqueue.Stored(moved.Jobs, moved.Pushed)
	}
	if moved.Rejected > 0 {
		first := p.Rejects[0]
		m.log.Warn("outbox rows rejected (GET /outbox/rejects)", "rows", moved.Rejected,
			"first_outbox_id", first.Row.ID, "first_reason", first.Reason)
	}
	return nil
}

// check makes the job of an outbox row as POST /job/{category} makes it
// of a request: the same checks, defaults and routing. It returns the
// reason a row is not a valid job, or an error when it could not tell
// (the database is away).
func (m *Mover) check(ctx context.Context, r *store.OutboxRow) (*store.JobInsertParams, string, error) {
	if err := validate.Name("category", r.Category); err != nil {
		return nil, err.Error(), nil
	}
	req := &rowqtype.JobRequest{RunAfter: r.RunAfter, MaxRetries: r.MaxRetries, RetryDelay: r.RetryDelay,
		Timeout: r.Timeout, Priority: r.Priority, UniqueKey: r.UniqueKey, TraceParent: r.TraceParent, TraceState: r.TraceState,
		ConcurrencyKey: r.ConcurrencyKey, ConcurrencyLimit: r.ConcurrencyLimit, Ordered: r.Ordered}
	if r.URL != nil {
		req.URL = *r.URL
	}
	if r.Payload != nil {
		// The column holds what POST /job's body holds in "payload": a
		// JSON value (a string is sent raw).
		payload := bytes.TrimSpace([]byte(*r.Payload))
		if !json.Valid(payload) {
			return nil, "payload: must be a JSON value (NULL for none; a JSON string such as \"text\" is sent raw)", nil
		}
		req.Payload = payload
	}
	if err := validate.Job(req, m.cfg.WorkerURLs); err != nil {
		return nil, err.Error(), nil
	}
	dest, err := m.cfg.Enqueue.Route(ctx, r.Category)
	var ue *enqueue.UnroutableError
	switch {
	case errors.As(err, &ue):
		return nil, "category: " + ue.Error(), nil
	case err != nil:
		return nil, "", fmt.Errorf("route outbox row %d: %w", r.ID, err)
	}
	var ckey string
	if r.ConcurrencyKey != nil {
		ckey = *r.ConcurrencyKey
	}
	if err := validate.JobQueue(req.URL, ckey, dest.Queue, dest.Pull); err != nil {
		return nil, err.Error(), nil
	}
	return validate.JobParams(dest.Queue, r.Category, req), "", nil
}

// truncate cuts s to at most n bytes, on a character boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
