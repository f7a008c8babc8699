package chaos

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/store/backend"
)

// DBGapAfter is how long a database fault's window lasts after its command
// ended: the window in which db_gap_ms looks for the longest time without
// a delivery, and in which a reap of a node whose database did not answer
// is classed cut_off. Ten seconds hold a Galera member's rejoin, a
// reconnect to the next host and the takeovers that follow.
const DBGapAfter = 10 * time.Second

// probeEvery is how often, in a database fault's window, the run asks
// each node database URL for its clock.
const probeEvery = 200 * time.Millisecond

// dbFaultRecord is one database fault: when its command began and ended,
// whether it exited non-zero, and the node database URLs that did not
// answer in its window (down, filled by the probes while the window lasts;
// guarded by run.mu).
type dbFaultRecord struct {
	at, done time.Time
	failed   bool
	down     map[string]bool
}

// dbFault runs the database fault's command, records when it ran, and
// probes the nodes' database URLs from its start until DBGapAfter after
// its end, in the background.
func (r *run) dbFault(ctx context.Context) {
	rec := &dbFaultRecord{at: time.Now(), down: map[string]bool{}}
	pctx, stopProbes := context.WithCancel(ctx)
	probed := r.probe(pctx, rec)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, "sh", "-c", r.o.DBFaultCmd).CombinedOutput()
	rec.done = time.Now()
	rec.failed = err != nil
	r.mu.Lock()
	r.dbFaults = append(r.dbFaults, rec)
	r.mu.Unlock()
	if err != nil {
		r.log.Warn("database fault command failed", "err", err, "output", strings.TrimSpace(string(out)))
	} else {
		r.log.Info("database fault over", "took", rec.done.Sub(rec.at).Round(time.Millisecond))
	}
	r.bg.Go(func() {
		select {
		case <-time.After(DBGapAfter):
		case <-ctx.Done():
		}
		stopProbes()
		probed.Wait()
	})
}

// nodeDatabaseURLs lists the distinct database URLs the nodes are given.
func (r *run) nodeDatabaseURLs() []string {
	var urls []string
	for slot := range r.o.Nodes {
		if u := r.c.databaseURL(slot); !slices.Contains(urls, u) {
			urls = append(urls, u)
		}
	}
	return urls
}

// probe asks each node database URL for the database's clock every
// probeEvery until ctx ends, each on a pool of its own opened for the
// fault, and marks in rec.down the URLs that failed to answer within a
// second: a killed, stopped or cut-off member, a primary gone. A clock
// read is a statement, which a Galera member outside the primary component
// refuses (1047), unlike a ping.
func (r *run) probe(ctx context.Context, rec *dbFaultRecord) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, u := range r.nodeDatabaseURLs() {
		st, err := backend.Open(u)
		if err != nil {
			r.log.Warn("database probe", "database", backend.Redact(u), "err", err)
			continue
		}
		wg.Go(func() {
			defer st.Close()
			tick := time.NewTicker(probeEvery)
			defer tick.Stop()
			for {
				qctx, cancel := context.WithTimeout(ctx, time.Second)
				_, err := st.Now(qctx)
				cancel()
				if err != nil && ctx.Err() == nil {
					r.mu.Lock()
					rec.down[u] = true
					r.mu.Unlock()
				}
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	return &wg
}
