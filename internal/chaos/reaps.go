package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// ReapResult counts the reaps the nodes logged (a line with dead_node: a
// node's registration deleted because its database session ended), each
// classed by why the reaped node was gone.
type ReapResult struct {
	// Killed: the reaped node had been SIGKILLed by the run.
	Killed int `json:"killed"`
	// Stopped: the reaped node was SIGSTOPped at the reap, or had been
	// continued less than stoppedGrace before it.
	Stopped int `json:"stopped"`
	// CutOff: the reap fell in a database fault's window and the reaped
	// node's database URL failed to answer the run's probes in that window.
	CutOff int `json:"cut_off"`
	// Live: none of these, a live node reaped: its queues claimed away
	// and its grabs rescued while it worked on.
	Live int `json:"live"`
	// LiveEach describes the first 20 live reaps.
	LiveEach []string `json:"live_each,omitempty"`
}

// stoppedGrace is how long after its SIGCONT a reap of a stopped node is
// still classed stopped: the reaper may have judged it while it was stopped
// and logged the reap a moment later.
const stoppedGrace = 3 * time.Second

// reapEvent is one reap a node logged.
type reapEvent struct {
	at   time.Time
	by   string // the node whose log has the line
	dead string // the reaped node
}

// readReaps reads the reaps from the JSON log of each node (by id); a log
// it cannot read is an error, the others still read.
func readReaps(logs map[string]string) ([]reapEvent, error) {
	var reaps []reapEvent
	var errs []error
	for by, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var line struct {
				Time     time.Time `json:"time"`
				DeadNode string    `json:"dead_node"`
			}
			// Lines that are not JSON (a panic, a start-up error) are
			// no reaps.
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.DeadNode != "" {
				reaps = append(reaps, reapEvent{at: line.Time, by: by, dead: line.DeadNode})
			}
		}
		if err := sc.Err(); err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", path, err))
		}
		f.Close()
	}
	slices.SortFunc(reaps, func(a, b reapEvent) int { return a.at.Compare(b.at) })
	return reaps, errors.Join(errs...)
}

// classifyReaps classes each reap: killed when the run had SIGKILLed the
// reaped node before the reap; stopped when the node was SIGSTOPped at the
// reap (or continued less than stoppedGrace before); cut_off when the reap
// fell in a database fault's window (its start to DBGapAfter after its end)
// and the node's database URL (nodeURL, by id) did not answer the probes
// in that window; live otherwise. began is the run's start, for LiveEach.
func classifyReaps(reaps []reapEvent, kills []*killRecord, stops []*stopRecord, faults []*dbFaultRecord,
	nodeURL map[string]string, began time.Time) *ReapResult {
	res := &ReapResult{}
	for _, rp := range reaps {
		switch {
		case slices.ContainsFunc(kills, func(k *killRecord) bool { return k.node == rp.dead && !k.at.After(rp.at) }):
			res.Killed++
		case slices.ContainsFunc(stops, func(s *stopRecord) bool {
			return s.node == rp.dead && !s.at.After(rp.at) && (s.cont.IsZero() || rp.at.Before(s.cont.Add(stoppedGrace)))
		}):
			res.Stopped++
		case slices.ContainsFunc(faults, func(f *dbFaultRecord) bool {
			return !f.at.After(rp.at) && rp.at.Before(f.done.Add(DBGapAfter)) && f.down[nodeURL[rp.dead]]
		}):
			res.CutOff++
		default:
			res.Live++
			if len(res.LiveEach) < 20 {
				res.LiveEach = append(res.LiveEach, fmt.Sprintf("%s reaped by %s at %.1f s",
					rp.dead, rp.by, rp.at.Sub(began).Seconds()))
			}
		}
	}
	return res
}

// classifyReaps reads the nodes' reaps from their logs and classes them.
func (r *run) classifyReaps() *ReapResult {
	logs, nodeURL := map[string]string{}, map[string]string{}
	for _, n := range r.c.nodes() {
		logs[n.id], nodeURL[n.id] = n.log, n.dbURL
	}
	reaps, err := readReaps(logs)
	if err != nil {
		r.log.Warn("read the nodes' reaps", "err", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return classifyReaps(reaps, r.kills, r.stops, r.dbFaults, nodeURL, r.began)
}
