package chaos

import (
	"slices"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/store/backend"
)

// report builds the Result from what the worker recorded and the faults
// injected.
func (r *run) report() *Result {
	jobs, _, injected, _ := r.w.snapshot()
	accepted, answered := make([]bool, r.total), make([]int64, r.total)
	for i := range accepted {
		accepted[i], answered[i] = r.accepted[i].Load(), r.answered[i].Load()
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
	for _, u := range r.o.NodeDatabaseURLs {
		res.NodeDatabaseURLs = append(res.NodeDatabaseURLs, backend.Redact(u))
	}
	analyze(res, jobs, accepted, r.kills, r.stops, r.dbFaults)
	checkIDs(res, jobs, accepted, answered)
	return res
}

// dialect names the database of a URL by its scheme.
func dialect(databaseURL string) string {
	scheme, _, ok := strings.Cut(databaseURL, "://")
	if !ok {
		return ""
	}
	return scheme
}

// analyze fills res's job figures from every job's deliveries (by seq, in
// arrival order), which jobs were accepted, and the faults.
func analyze(res *Result, jobs [][]delivery, accepted []bool, kills []*killRecord, stops []*stopRecord, dbFaults []*dbFaultRecord) {
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
	res.Kills, res.Stops, res.DBFaults = len(kills), len(stops), len(dbFaults)

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

	if len(dbFaults) > 0 {
		var resume, gaps []time.Duration
		for _, f := range dbFaults {
			if f.failed {
				res.DBFaultErrors++
			}
			if next, ok := nextBy(nil, "", f.done); ok {
				resume = append(resume, next.Sub(f.done))
			}
			gaps = append(gaps, longestGap(jobs, f.at, f.done.Add(DBGapAfter)))
		}
		res.DBResumeMS, res.DBGapMS = spread(resume), spread(gaps)
	} else {
		res.NotMeasured = append(res.NotMeasured, "db_resume_ms, db_gap_ms (no database fault)")
	}
}

// longestGap returns the longest time without a delivery between from and
// to, to cut at the run's last delivery (after which the queue was
// drained, not stalled).
func longestGap(jobs [][]delivery, from, to time.Time) time.Duration {
	var last time.Time
	var in []time.Time
	for _, ds := range jobs {
		for _, d := range ds {
			if d.at.After(last) {
				last = d.at
			}
			if d.at.After(from) && d.at.Before(to) {
				in = append(in, d.at)
			}
		}
	}
	if last.Before(to) {
		to = last
	}
	if !to.After(from) {
		return 0
	}
	slices.SortFunc(in, time.Time.Compare)
	gap, prev := time.Duration(0), from
	for _, t := range append(in, to) {
		gap = max(gap, t.Sub(prev))
		prev = t
	}
	return gap
}

// checkIDs compares, for each accepted job delivered at least once, the id
// its enqueue was answered with the id each of its deliveries carried.
func checkIDs(res *Result, jobs [][]delivery, accepted []bool, answered []int64) {
	for seq, ds := range jobs {
		if !accepted[seq] || len(ds) == 0 {
			continue
		}
		res.IDsChecked++
		if slices.ContainsFunc(ds, func(d delivery) bool { return d.id != answered[seq] }) {
			res.IDMismatches++
			if len(res.IDMismatchSeqs) < 20 {
				res.IDMismatchSeqs = append(res.IDMismatchSeqs, seq)
			}
		}
	}
}
