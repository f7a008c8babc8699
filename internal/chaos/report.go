package chaos

import (
	"net/url"
	"slices"
	"strings"
	"time"
)

// report builds the Result from what the worker recorded and the faults
// injected.
func (r *run) report() *Result {
	jobs, _, injected, _ := r.w.snapshot()
	accepted := make([]bool, r.total)
	for i := range accepted {
		accepted[i] = r.accepted[i].Load()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res := &Result{
		Database: dialect(r.o.DatabaseURL), Nodes: r.o.Nodes, Rate: r.o.Rate, DurationS: r.o.Duration.Seconds(),
		Faults: strings.Join(r.o.Faults, ","), EveryS: r.o.Every.Seconds(), Keys: r.o.Keys, KeyLimit: r.o.KeyLimit,
		NodeTTLS: r.o.NodeTTL.Seconds(), GrabLeaseS: r.o.GrabLease.Seconds(),
		KillsSkipped: r.skipped, WorkerFaults: injected, EnqueueErrors: map[string]int{},
		RefusedWithoutRetryAfter: r.refusedNoRetryAfter,
	}
	for k, v := range r.enqErrs {
		res.EnqueueErrors[k] = v
	}
	analyze(res, jobs, accepted, r.kills, r.stops, r.restarts)
	return res
}

// dialect names the database of a URL by its scheme.
func dialect(databaseURL string) string {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return ""
	}
	return u.Scheme
}

// analyze fills res's job figures from every job's deliveries (by seq, in
// arrival order), which jobs were accepted, and the faults.
func analyze(res *Result, jobs [][]delivery, accepted []bool, kills []*killRecord, stops []*stopRecord, restarts []*restartRecord) {
	for seq, ds := range jobs {
		ok := slices.ContainsFunc(ds, func(d delivery) bool { return d.outcome == success })
		switch {
		case accepted[seq] && ok:
			res.Delivered++
		case accepted[seq]:
			res.Lost++
			if len(res.LostSeqs) < 20 {
				res.LostSeqs = append(res.LostSeqs, seq)
			}
		case len(ds) > 0:
			res.DeliveredUnaccepted++
		}
		if accepted[seq] {
			res.Accepted++
		}
		for i := 1; i < len(ds); i++ {
			if ds[i-1].outcome == fault {
				res.Retries++
			} else {
				res.Duplicates++
				if ds[i-1].outcome == success {
					res.DuplicatesAfterSuccess++
				}
			}
		}
	}
	res.Kills, res.Stops, res.DBRestarts = len(kills), len(stops), len(restarts)

	// nextBy is the first delivery after t by a node other than not ("":
	// any node) and the nodes stopped at t, whose late deliveries after
	// their SIGCONT are no takeover; ok is false when there is none.
	nextBy := func(seqs []int, not string, t time.Time) (first time.Time, ok bool) {
		skip := map[string]bool{not: not != ""}
		for _, s := range stops {
			if !s.at.After(t) && (s.cont.IsZero() || s.cont.After(t)) {
				skip[s.node] = true
			}
		}
		visit := func(ds []delivery) {
			for _, d := range ds {
				if !skip[d.by] && d.at.After(t) && (!ok || d.at.Before(first)) {
					first, ok = d.at, true
				}
			}
		}
		if seqs == nil {
			for _, ds := range jobs {
				visit(ds)
			}
		}
		for _, seq := range seqs {
			if seq >= 0 && seq < len(jobs) {
				visit(jobs[seq])
			}
		}
		return first, ok
	}

	// heldAt returns the jobs node held at t: grabbed a moment before (the
	// listing in listed), or open at the worker at t; less those answered
	// success before t. open counts the deliveries open at t.
	heldAt := func(node string, t time.Time, listed []int) (held map[int]bool, open int) {
		held = map[int]bool{}
		for _, seq := range listed {
			held[seq] = true
		}
		for seq, ds := range jobs {
			for _, d := range ds {
				if d.by == node && !d.at.After(t) && (d.end.IsZero() || d.end.After(t)) {
					open++
					held[seq] = true
				}
			}
		}
		for seq := range held {
			if seq < 0 || seq >= len(jobs) || slices.ContainsFunc(jobs[seq], func(d delivery) bool {
				return d.outcome == success && !d.end.After(t)
			}) {
				delete(held, seq)
			}
		}
		return held, open
	}

	if len(kills) > 0 {
		inFlight, notRedelivered := 0, 0
		var failover, redelivery []time.Duration
		for _, k := range kills {
			held, open := heldAt(k.node, k.at, k.held)
			inFlight += open
			if next, ok := nextBy(nil, k.node, k.at); ok {
				failover = append(failover, next.Sub(k.at))
			}
			if len(held) == 0 {
				continue
			}
			var worst time.Duration
			complete := true
			for seq := range held {
				next, ok := nextBy([]int{seq}, k.node, k.at)
				if !ok {
					notRedelivered++
					complete = false
					continue
				}
				worst = max(worst, next.Sub(k.at))
			}
			if complete {
				redelivery = append(redelivery, worst)
			}
		}
		res.InFlightAtKills, res.NotRedelivered = &inFlight, &notRedelivered
		res.FailoverMS, res.RedeliveryMS = spread(failover), spread(redelivery)
		if res.RedeliveryMS == nil {
			res.NotMeasured = append(res.NotMeasured, "redelivery_ms (no kill left a held job)")
		}
	} else {
		res.NotMeasured = append(res.NotMeasured, "in_flight_at_kills, failover_ms, redelivery_ms (no kill)")
	}

	if len(stops) > 0 {
		stale := 0
		var failover []time.Duration
		for _, s := range stops {
			if next, ok := nextBy(nil, s.node, s.at); ok {
				failover = append(failover, next.Sub(s.at))
			}
			if s.cont.IsZero() {
				continue
			}
			// A job the node held at the SIGSTOP is stale when the node
			// delivered it after its SIGCONT although another node had
			// delivered it since the SIGSTOP: the node had lost it.
			held, _ := heldAt(s.node, s.at, s.held)
			for seq := range held {
				ds := jobs[seq]
				if slices.ContainsFunc(ds, func(late delivery) bool {
					return late.by == s.node && !late.at.Before(s.cont) &&
						slices.ContainsFunc(ds, func(d delivery) bool {
							return d.by != s.node && d.at.After(s.at) && !d.at.After(late.at)
						})
				}) {
					stale++
				}
			}
		}
		res.StopFailoverMS, res.StaleAfterCont = spread(failover), &stale
	} else {
		res.NotMeasured = append(res.NotMeasured, "stop_failover_ms, stale_after_cont (no stop)")
	}

	if len(restarts) > 0 {
		var resume []time.Duration
		for _, rs := range restarts {
			if next, ok := nextBy(nil, "", rs.done); ok {
				resume = append(resume, next.Sub(rs.done))
			}
		}
		res.DBResumeMS = spread(resume)
	} else {
		res.NotMeasured = append(res.NotMeasured, "db_resume_ms (no database restart)")
	}
}
