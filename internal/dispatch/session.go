package dispatch

import (
	"context"
	"errors"
	"time"
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
