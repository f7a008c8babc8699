package dispatch

import (
	"cmp"
	"slices"

	"github.com/rowq/rowq/internal/store"
)

// Queues are spread over the live nodes by count: with Q queues and N live
// nodes, each node leads between lo = ⌊Q/N⌋ and hi = ⌈Q/N⌉ of them. Every
// node decides its own moves in its leadership cycle from one read of the
// live nodes and their counts (store.NodesLive), so no node coordinates
// the others:
//
//   - a node below hi claims free queues up to hi, unless another node is
//     below lo: then only the nodes below lo claim, so that what the others
//     give up goes to them;
//   - a node above hi gives up (yields) the excess, at most maxYield a
//     cycle; a node above lo yields one a cycle while another is below lo.
//
// Claims and yields cannot both be due in one cycle. A yielded queue is
// free until a node below its share claims it, at its next cycle: at most
// one refresh interval. A node that dies frees its queues (the session's
// reap, or its registration's expiry): the others' shares grow, and they
// claim them at their next cycle, as before spreading.
//
// By count, not by load: a queue's load moves faster than a handover could
// follow it, and a count gives every node the same answer from the same
// read. A few hot queues can still land on one node (docs/architecture.md).

// maxYield bounds the queues a node gives up per leadership cycle, so that
// moves are gradual: a node that joins a cluster of 10,000 queues led by
// three others gets its 2,500 in about 9 cycles (9 s at the default refresh
// interval), 300 handovers a second in all. At 50, on a machine at load 36,
// it took 41 s.
const maxYield = 100

// share returns how many free queues node me claims now (at most) and how
// many of its queues it yields, given the live nodes c.
func share(c *store.Cluster, me string) (claim, yield int) {
	led, live, needy := 0, false, false
	n := len(c.Nodes)
	if n == 0 {
		return 0, 0
	}
	lo := c.Queues / n
	hi := lo
	if c.Queues%n != 0 {
		hi++
	}
	for _, x := range c.Nodes {
		if x.ID == me {
			led, live = x.Leads, true
		} else if x.Leads < lo {
			needy = true
		}
	}
	if !live { // not registered, or expired: QueuesClaim would refuse it anyway
		return 0, 0
	}
	switch {
	case led < lo, led < hi && !needy:
		claim = hi - led
	case led > hi:
		yield = min(led-hi, maxYield)
	case led > lo && needy:
		yield = 1
	}
	return claim, yield
}

// toYield picks n of the queues led to give up, those whose handover costs
// least first: a queue this node has no runner for yet, then a parked one
// with no delivery in flight, then the one with the fewest deliveries in
// flight. d.mu is held.
func (d *Dispatcher) toYield(led []*store.Queue, n int) []string {
	cost := func(q *store.Queue) int64 {
		r := d.runners[q.Name]
		switch {
		case r == nil:
			return 0
		case r.probe.parked.Load() && r.slots.inflight.Load() == 0:
			return 1
		default:
			return 2 + r.slots.inflight.Load()
		}
	}
	order := slices.Clone(led)
	slices.SortStableFunc(order, func(a, b *store.Queue) int { return cmp.Compare(cost(a), cost(b)) })
	names := make([]string, 0, n)
	for _, q := range order[:min(n, len(order))] {
		names = append(names, q.Name)
	}
	return names
}
