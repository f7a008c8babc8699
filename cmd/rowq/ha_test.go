//go:build ha

package main_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/chaos"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// The short HA runs of `make test` (tag ha): rowq chaos on the Galera
// cluster of scripts/galera.sh and on the PostgreSQL pair of
// scripts/pg-ha.sh, killing rowq nodes and a database member under load
// (docs/ha.md). `make ha` runs them for five minutes each (tag halong).

// haChaos runs rowq chaos with args and returns its report, whether the
// run passed or not: the test says what failed.
func haChaos(t *testing.T, args ...string) *chaos.Result {
	t.Helper()
	cmd := exec.Command(rowqBin, append([]string{"chaos", "--dir", t.TempDir(), "--quiet"}, args...)...)
	cmd.Env = baseEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var res chaos.Result
	if jerr := json.Unmarshal(out, &res); jerr != nil {
		t.Fatalf("rowq chaos: %v; report %v\nstdout: %s\nstderr:\n%s", err, jerr, out, stderr.String())
	}
	t.Logf("rowq chaos (exit %v): %s", err, out)
	return &res
}

// load returns the chaos flags of the load and the faults: three nodes,
// the default settings but for a short grab lease, and the faults taking
// turns, a short run's or, with the tag halong, five minutes at 300 jobs/s
// with a rowq node killed every 20 s and a database fault every seventh
// turn.
//
// The short runs give the nodes a TTL of 3 s rather than the default (0:
// 1.5 s on Galera), so that a renewal a loaded test machine holds up for
// 1.5 s does not count as a live node reaped; `make ha` runs the defaults.
func load(faults string) []string {
	rate, every, duration, ttl := "150", "10s", "35s", "3s"
	if long {
		rate, every, duration, ttl, faults = "300", "20s", "300s", "0", "kill,kill,kill,kill,kill,kill,db"
	}
	return []string{"--nodes", "3", "--rate", rate, "--duration", duration, "--faults", faults, "--every", every,
		"--node-ttl", ttl, "--grab-lease", "5s"}
}

// checkHA fails the test for every promise of docs/ha.md a chaos report
// breaks: no accepted job lost, every id the one answered, no live node
// reaped, no refusal without Retry-After, no lock held twice, no tick lost
// or doubled.
func checkHA(t *testing.T, res *chaos.Result) {
	t.Helper()
	if res.Accepted == 0 || res.Lost != 0 || !res.Drained {
		t.Errorf("accepted %d, lost %d (%v), drained %v; want every accepted job delivered", res.Accepted, res.Lost, res.LostSeqs, res.Drained)
	}
	if res.IDsChecked != res.Delivered || res.IDMismatches != 0 {
		t.Errorf("ids checked %d of %d delivered, %d mismatches (%v); want every job delivered under the id it was answered",
			res.IDsChecked, res.Delivered, res.IDMismatches, res.IDMismatchSeqs)
	}
	if r := res.Reaps; r == nil || r.Live != 0 {
		t.Errorf("reaps %+v; want no live node reaped", r)
	}
	if res.RefusedWithoutRetryAfter != 0 {
		t.Errorf("%d enqueues refused without Retry-After", res.RefusedWithoutRetryAfter)
	}
	if l := res.Lock; l == nil || l.Acquisitions == 0 || l.DoubleHolds != 0 || l.TokensNotIncreasing != 0 {
		t.Errorf("lock check %+v; want acquisitions, no double hold, tokens increasing", l)
	}
	if s := res.Schedule; s == nil || s.Runs == 0 || s.Lost != 0 || s.Doubled != 0 {
		t.Errorf("schedule check %+v; want runs, none lost or doubled", s)
	}
}

// TestHA_GaleraNodeOnEachMember: three rowq nodes, each writing through
// its own Galera member; the leader is SIGKILLed, then member 3 is killed
// and restarted. Takeover after a kill is promised within 3 s at the
// default TTL; with the short runs' 3 s TTL the test allows 6 s.
func TestHA_GaleraNodeOnEachMember(t *testing.T) {
	g := dbtest.StartGalera(t).Database(t)
	args := append(load("kill,db,kill"), "--database-url", g.Members[0],
		"--db-fault-cmd", g.Shell(t, "kill 3")+"; sleep 2; "+g.Shell(t, "restart 3"))
	for _, m := range g.Members {
		args = append(args, "--node-database-url", m)
	}
	res := haChaos(t, args...)
	checkHA(t, res)
	if res.Kills == 0 || res.DBFaults == 0 || res.DBFaultErrors != 0 {
		t.Errorf("kills %d, db faults %d (%d failed); want both", res.Kills, res.DBFaults, res.DBFaultErrors)
	}
	limit := int64(6000)
	if long {
		limit = 3000
	}
	if f := res.FailoverMS; f == nil || f.N != res.Kills || f.Max > limit {
		t.Errorf("takeover after a kill %+v ms; want each of the %d within %d", f, res.Kills, limit)
	}
}

// TestHA_PostgresFailover: three rowq nodes on a PostgreSQL primary with a
// synchronous standby; a node is SIGKILLed, then the primary is stopped at
// once and the standby promoted. Deliveries are promised to resume within
// 5 s of the promotion.
func TestHA_PostgresFailover(t *testing.T) {
	p := dbtest.StartPGHA(t, "sync").Database(t)
	// The standby comes back after each failover, so that the next one
	// has a standby to promote.
	res := haChaos(t, append(load("kill,db"), "--database-url", p.URL,
		"--db-fault-cmd", p.Shell(t, "failover")+" && "+p.Shell(t, "rejoin sync"))...)
	checkHA(t, res)
	if res.DBFaults == 0 || res.DBFaultErrors != 0 {
		t.Errorf("db faults %d (%d failed); want a failover", res.DBFaults, res.DBFaultErrors)
	}
	if g := res.DBGapMS; g == nil || g.Max > 5000 {
		t.Errorf("longest time without a delivery around a failover %+v ms; want within 5000", g)
	}
}
