package dispatch

import (
	"context"
	"errors"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// The node's database session: the dispatcher holds a lock named for its
// node on a database connection of its own (store.NodeSession), which the
// database frees the moment this process dies or that connection drops.
// Every node reaps, at each leadership cycle, the registrations of nodes
// whose lock is free (store.NodesReap); a reaped node's queues are then
// claimed at once, and its grabs rescued at once by the queues' new
// leaders, instead of after the node TTL and the grab lease. Those stay
// the fallback for a node that is frozen or cut off while its session
// lives on.
//
// A node that finds its session gone (the database restarted, the
// connection was cut) assumes it lost its queues: it opens a new session,
// registers again, and leads what the claim gives it; a job it still
// delivers from before cannot be acknowledged, as after any lost grab.
//
// A database restart frees every node's lock at once, and each node learns
// of it only at its next cycle. So that the first node back does not reap
// all the others in between, a node reaps only once its own session has
// been open for reapGrace: a restart renews every session, so nobody reaps
// until every live node has had a few cycles to open its new one.

// holdSession opens the node's session if it has none, or checks the one
// it has, and reports whether the node holds one. It runs in the
// leadership cycle only.
func (d *Dispatcher) holdSession(ctx context.Context) bool {
	if d.lease.Load() {
		return false
	}
	if d.session != nil {
		err := d.session.Check(ctx)
		if err == nil {
			return true
		}
		d.log.Warn("database session lost; opening a new one (other nodes may have taken this node's queues)", "err", err)
		d.session.Close()
		d.session = nil
	}
	s, err := d.cfg.Store.NodeSessionOpen(ctx, d.cfg.Node)
	if errors.Is(err, store.ErrLocalSession) {
		d.startLease(err)
		return false
	}
	if err != nil {
		if !d.noSession {
			msg := "database session not held; other nodes notice this node's death by its registration's TTL only"
			if errors.Is(err, errors.ErrUnsupported) {
				d.log.Info(msg, "err", err)
			} else {
				d.log.Warn(msg+"; retrying", "err", err)
			}
			d.noSession = true
		}
		return false
	}
	if d.noSession {
		d.log.Info("database session held again")
		d.noSession = false
	}
	d.session, d.sessionSince = s, time.Now()
	return true
}

// reapGrace is how long a node's session must have been open before the
// node reaps others: three leadership cycles.
func (d *Dispatcher) reapGrace() time.Duration { return 3 * d.cfg.RefreshInterval }

// reap takes the registrations of nodes whose session ended away, so that
// their queues are claimed in this cycle.
func (d *Dispatcher) reap(ctx context.Context) error {
	if d.session == nil || time.Since(d.sessionSince) < d.reapGrace() {
		return nil
	}
	dead, err := d.cfg.Store.NodesReap(ctx)
	for _, id := range dead {
		d.log.Info("node's database session ended; its queues and grabbed jobs are taken over", "dead_node", id)
	}
	return err
}

// closeSession releases the session at the end of Stop.
func (d *Dispatcher) closeSession() error {
	if d.session == nil {
		return nil
	}
	err := d.session.Close()
	d.session = nil
	return err
}

// Leases. On a database whose session locks are local to the server that
// holds them (a Galera member: store.ErrLocalSession), a node's lock on
// member A means nothing to a node connected to member B, which would reap
// it alive. There the node's registration is its lease instead: keepLease
// renews it every TTL/5 (the TTL is leaseTTL unless --node-ttl says
// otherwise), and reaps the registrations that expired
// (store.NodesReapExpired), so that their queues are claimed, and their
// grabs rescued, at once.
//
// A database that stalls stalls every node's renewals at once (Galera
// holds every commit while it evicts a dead member), and every lease may
// lapse together; the first node to write again must not reap the others.
// So a node reaps only while it is steady: its own renewals have gone
// through without a gap longer than the TTL for a whole TTL, long enough
// for every live peer to have renewed too. A node counts its lease from
// the moment it sent a renewal, not from the answer, so it never thinks
// itself live longer than its peers do.

// leaseTTL is a lease's TTL unless Config.NodeTTL sets one.
const leaseTTL = 1500 * time.Millisecond

// defaultNodeTTL is the registration's TTL of a node that holds a session,
// unless Config.NodeTTL sets one.
const defaultNodeTTL = 10 * time.Second

// ttl is how long this node's registration lasts without a renewal.
func (d *Dispatcher) ttl() time.Duration {
	switch {
	case d.cfg.NodeTTL > 0:
		return d.cfg.NodeTTL
	case d.lease.Load():
		return leaseTTL
	}
	return defaultNodeTTL
}

// startLease turns this node to leases, for good: its database cannot hold
// a session that others can see.
func (d *Dispatcher) startLease(err error) {
	d.lease.Store(true)
	d.log.Info("database session locks are local to one cluster member; the node keeps a lease instead", "ttl", d.ttl(), "err", err)
	d.leaseDone.Add(1)
	go d.keepLease()
}

// keepLease renews the node's lease every TTL/5 until Stop, and reaps the
// nodes whose lease expired while this node is steady.
func (d *Dispatcher) keepLease() {
	defer d.leaseDone.Done()
	ttl := d.ttl()
	t := time.NewTicker(ttl / 5)
	defer t.Stop()
	var st steadiness
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ttl)
		sent := time.Now()
		err := d.renewLease(ctx, sent)
		st.note(sent, time.Now(), err == nil, ttl)
		if err == nil && st.steady(ttl) {
			d.reapExpired(ctx)
		}
		cancel()
	}
}

// renewLease renews the node's registration for a TTL from sent. A renewal
// after the lease lapsed marks the node lapsed: it may have lost its queues,
// so it stays stale until the leadership cycle has read them all again.
func (d *Dispatcher) renewLease(ctx context.Context, sent time.Time) error {
	err := d.cfg.Store.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: d.cfg.Node, Host: d.cfg.Host, TTL: d.ttl()})
	if err != nil {
		return err
	}
	if last := d.lastBeat.Load(); last != 0 && sent.Sub(time.Unix(0, last)) > d.ttl() {
		d.lapsed.Store(true)
		d.refreshNow()
	}
	d.lastBeat.Store(sent.UnixNano())
	return nil
}

// reapExpired deletes the registrations of nodes whose lease expired, and
// runs a leadership cycle at once to claim their queues.
func (d *Dispatcher) reapExpired(ctx context.Context) {
	dead, err := d.cfg.Store.NodesReapExpired(ctx)
	for _, id := range dead {
		d.log.Info("node's lease expired; its queues and grabbed jobs are taken over", "dead_node", id)
	}
	if err != nil {
		d.log.Warn("reaping expired nodes failed", "err", err)
	}
	if len(dead) > 0 {
		d.refreshNow()
	}
}

// steadiness tells whether a node's renewals have gone through without a
// gap for a while (see Leases above).
type steadiness struct {
	since time.Time // when the unbroken run of renewals began (zero: none)
	last  time.Time // when the last renewal that went through was sent
}

// note records a renewal sent at sent that ended at done, ok or not. A
// failed renewal, or one that ended more than ttl after the previous one
// was sent, starts the run again.
func (s *steadiness) note(sent, done time.Time, ok bool, ttl time.Duration) {
	if !ok {
		*s = steadiness{}
		return
	}
	if s.since.IsZero() || done.Sub(s.last) > ttl {
		s.since = sent
	}
	s.last = sent
}

// steady reports whether the renewals have gone through unbroken for ttl.
func (s *steadiness) steady(ttl time.Duration) bool {
	return !s.since.IsZero() && s.last.Sub(s.since) >= ttl
}
