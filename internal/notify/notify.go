// Package notify nudges the dispatcher that leads a queue on another node:
// an HTTP POST /queue/{name}/wake to the leader's advertised address, sent
// when a job of the queue became due (Wake), its settings changed
// (Changed), a job was cancelled (Cancel) or a lease ended (Finished)
// through this node. It also forwards a pull queue's lease requests to the
// queue's leader, which serves them (Lease). The dispatcher (internal/dispatch) uses it
// for the queues it does not lead itself; a job enqueued on any node is
// then dispatched at once, not at the leader's next look. Polling stays the
// safety net: a nudge that is lost (the leader just changed, the network
// dropped it) delays its job by at most the queue's polling_interval.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// Leaders finds the node leading a queue (store.Store does).
type Leaders interface {
	QueueLeader(ctx context.Context, queue string) (*store.Node, error)
}

// Config configures a Nudger.
type Config struct {
	Leaders Leaders
	Logger  *slog.Logger
	// Node is this node's id: a queue this node leads is never nudged
	// over HTTP.
	Node string
	// Client sends the nudges (a short-timeout client by default).
	Client *http.Client
	// Scheme is how the other nodes serve: "http" (the default) or
	// "https" (rowq serve --tls-cert; Client must then trust their
	// certificates, which must name the host they advertise).
	Scheme string
	// LeaderTTL is how long a queue's leader is remembered before it is
	// read again (1s): a nudge per job does not cost a read per job.
	LeaderTTL time.Duration
	// Key is the secret the nodes of the database share (internal/auth's
	// node key), sent as a bearer token: with authentication on, the
	// wake endpoint takes no other token but an admin one.
	Key string
}

// nudgeTimeout bounds one nudge; the poll covers a nudge that fails.
const nudgeTimeout = time.Second

// nudgeGap spaces the nudges to one queue. A nudge wakes a runner that
// then grabs until its grabs come back short, so a queue receiving jobs
// from another node needs a nudge only now and then: one per round trip
// cost the enqueueing node an HTTP request per job or two (end to end
// 0.82-0.85x through a node that does not lead the queue), and the jobs of
// a quiet queue wait at most this much longer.
const nudgeGap = 5 * time.Millisecond

// Nudger nudges the leader of a queue on another node.
type Nudger struct {
	cfg Config

	mu      sync.Mutex
	leaders map[string]leader
	// sending holds the queues a nudge is on its way to; true means a
	// wake came that no nudge has carried yet, and one more must follow,
	// so that a busy queue gets one nudge per nudgeGap, not one per job.
	sending map[string]bool
	// ended holds, per queue, the ends of leases not sent yet; a queue is
	// in it while its nudges are on their way (Finished).
	ended map[string][]store.JobGrab
	// forward sends lease requests, which last as long as they wait.
	forward *http.Client
}

type leader struct {
	node, host string
	read       time.Time
}

// New returns a Nudger.
func New(cfg Config) *Nudger {
	if cfg.LeaderTTL <= 0 {
		cfg.LeaderTTL = time.Second
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: nudgeTimeout}
	}
	if cfg.Scheme == "" {
		cfg.Scheme = "http"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Nudger{cfg: cfg, leaders: map[string]leader{}, sending: map[string]bool{}, ended: map[string][]store.JobGrab{},
		forward: &http.Client{Transport: cfg.Client.Transport}}
}

// Wake tells the leader of queue, if another node, that a job is due now.
// It does not wait for a nudge to arrive; wakes that come while a nudge
// is on its way merge into one more.
func (n *Nudger) Wake(queue string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, busy := n.sending[queue]
	n.sending[queue] = true
	if !busy {
		go n.send(queue, n.nextWake)
	}
}

// Changed tells the leader of queue, if another node, that the queue's
// settings changed (the change has committed): it re-reads them now, so
// that a pause or a new max_workers made through any node takes effect at
// once rather than at the leader's next refresh. It does not wait for the
// nudge to arrive.
func (n *Nudger) Changed(queue string) {
	go n.nudge(queue, settingsBody)
}

// Cancel tells the leader of queue, if another node, that job id was
// cancelled: it aborts the job's delivery if it runs there. It does not
// wait for the nudge to arrive.
func (n *Nudger) Cancel(queue string, id int64) {
	go n.nudge(queue, `{"cancel":`+strconv.FormatInt(id, 10)+`}`)
}

// maxEnded bounds the lease ends of one nudge.
const maxEnded = 1000

// Finished tells the leader of queue, if another node, that the lease of
// grab g ended here (completed, failed or cancelled): a pulled job's
// worker slot comes free there. It does not wait for the nudge; ends that
// come while one is on its way go together in the next. A nudge that is
// lost is mended by the leader's own count of the queue's leases.
func (n *Nudger) Finished(queue string, g store.JobGrab) {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, busy := n.ended[queue]
	n.ended[queue] = append(n.ended[queue], g)
	if !busy {
		go n.send(queue, n.nextEnded)
	}
}

// send nudges the leader of queue with what next takes, at most one nudge
// per nudgeGap, until next finds nothing left to send: what comes while a
// nudge is on its way goes in the next one. next (nextWake, nextEnded)
// forgets queue when it finds nothing, so that the next Wake or Finished
// starts a send of its own.
func (n *Nudger) send(queue string, next func(queue string) (body string, ok bool)) {
	for {
		began := time.Now()
		body, ok := next(queue)
		if !ok {
			return
		}
		n.nudge(queue, body)
		time.Sleep(nudgeGap - time.Since(began))
	}
}

// nextWake takes the wake of queue not sent yet, if any; a wake's nudge
// has no body.
func (n *Nudger) nextWake(queue string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.sending[queue] {
		delete(n.sending, queue)
		return "", false
	}
	n.sending[queue] = false // still there: a nudge is on its way
	return "", true
}

// nextEnded takes up to maxEnded lease ends of queue not sent yet, if any,
// as a nudge's body.
func (n *Nudger) nextEnded(queue string) (string, bool) {
	n.mu.Lock()
	gs := n.ended[queue]
	if len(gs) == 0 {
		delete(n.ended, queue)
		n.mu.Unlock()
		return "", false
	}
	k := min(len(gs), maxEnded)
	req := rowqtype.WakeRequest{Finished: make([]rowqtype.LeaseEnd, k)}
	for i, g := range gs[:k] {
		req.Finished[i] = rowqtype.LeaseEnd{ID: g.ID, Grabs: g.Grabs}
	}
	n.ended[queue] = gs[k:] // still there: a nudge is on its way
	n.mu.Unlock()
	body, _ := json.Marshal(&req)
	return string(body), true
}

// ForwardedHeader marks a lease request one node forwarded to another: the
// node that gets it serves it or answers no job, and forwards it no
// further.
const ForwardedHeader = "Rowq-Forwarded"

// ErrNoLeader is Lease's answer when no other node leads the queue (no
// live node does, or this node does).
var ErrNoLeader = errors.New("no other node leads the queue")

// Lease forwards a lease request of a pull queue (its JSON body) to the
// queue's leader on another node, which serves it, and returns the
// leader's answer: its status and body. ctx bounds it: the request waits
// as long as its body says.
func (n *Nudger) Lease(ctx context.Context, queue string, body []byte) (int, []byte, error) {
	l, err := n.leader(queue)
	if err != nil {
		return 0, nil, err
	}
	if l.host == "" || l.node == n.cfg.Node {
		return 0, nil, ErrNoLeader
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.Scheme+"://"+l.host+"/queue/"+url.PathEscape(queue)+"/lease", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ForwardedHeader, n.cfg.Node)
	if n.cfg.Key != "" {
		req.Header.Set("Authorization", "Bearer "+n.cfg.Key)
	}
	resp, err := n.forward.Do(req)
	if err != nil {
		n.forget(queue)
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// forget drops the remembered leader of queue: it may have changed.
func (n *Nudger) forget(queue string) {
	n.mu.Lock()
	delete(n.leaders, queue)
	n.mu.Unlock()
}

// settingsBody asks the leader to re-read the queue's settings too.
const settingsBody = `{"settings":true}`

// nudge POSTs body to the wake endpoint of queue's leader, if another
// node.
func (n *Nudger) nudge(queue, body string) {
	l, err := n.leader(queue)
	if err != nil {
		n.cfg.Logger.Debug("find the leader to nudge", "queue", queue, "err", err)
		return
	}
	if l.host == "" || l.node == n.cfg.Node {
		return // no live leader, or this node's runner is about to start
	}
	ctx, cancel := context.WithTimeout(context.Background(), nudgeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.Scheme+"://"+l.host+"/queue/"+url.PathEscape(queue)+"/wake", strings.NewReader(body))
	if err == nil {
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if n.cfg.Key != "" {
			req.Header.Set("Authorization", "Bearer "+n.cfg.Key)
		}
		var resp *http.Response
		if resp, err = n.cfg.Client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
	}
	if err != nil {
		n.forget(queue) // read it again next time
		n.cfg.Logger.Debug("nudge the leader", "queue", queue, "node", l.node, "host", l.host, "err", err)
	}
}

// leader returns the remembered leader of queue, reading it when older than
// LeaderTTL. A queue with no live leader is remembered too (empty host).
func (n *Nudger) leader(queue string) (leader, error) {
	n.mu.Lock()
	l, ok := n.leaders[queue]
	n.mu.Unlock()
	if ok && time.Since(l.read) < n.cfg.LeaderTTL {
		return l, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), nudgeTimeout)
	defer cancel()
	l = leader{read: time.Now()}
	node, err := n.cfg.Leaders.QueueLeader(ctx, queue)
	switch {
	case err == nil:
		l.node, l.host = node.ID, node.Host
	case !errors.Is(err, store.ErrNotFound):
		return leader{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.leaders) > maxLeaders {
		clear(n.leaders) // queues come and go: do not grow without bound
	}
	n.leaders[queue] = l
	return l, nil
}

// maxLeaders bounds the remembered leaders.
const maxLeaders = 100_000
