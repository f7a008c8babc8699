//go:build ha && halong

package main_test

import (
	"testing"

	"github.com/rowq/rowq/internal/store/dbtest"
)

// long: `make ha` runs the five-minute HA runs.
const long = true

// TestHA_GaleraAllThroughOneMember: every rowq node writes through member
// 1 of a URL naming the three members (the recommended topology); member
// 1 is killed and restarted, and the nodes move to the next member by
// themselves.
func TestHA_GaleraAllThroughOneMember(t *testing.T) {
	g := dbtest.StartGalera(t).Database(t)
	res := haChaos(t, append(load("kill,db"), "--database-url", g.URL,
		"--db-fault-cmd", g.Shell(t, "kill 1")+"; sleep 2; "+g.Shell(t, "restart 1"))...)
	checkHA(t, res)
	if f := res.FailoverMS; f == nil || f.N != res.Kills || f.Max > 3000 {
		t.Errorf("takeover after a kill %+v ms; want each of the %d within 3000", f, res.Kills)
	}
}

// TestHA_PostgresAsyncFailover is the counter-example of docs/ha.md: the
// same failovers with an asynchronous standby. It checks what an
// asynchronous standby does not endanger, and logs what was lost.
func TestHA_PostgresAsyncFailover(t *testing.T) {
	p := dbtest.StartPGHA(t, "async").Database(t)
	t.Cleanup(func() { dbtest.StartPGHA(t, "sync") })
	res := haChaos(t, append(load("kill,db"), "--database-url", p.URL,
		"--db-fault-cmd", p.Shell(t, "failover")+" && "+p.Shell(t, "rejoin async"))...)
	t.Logf("asynchronous standby: %d accepted, %d lost, %d duplicates, %d id mismatches", res.Accepted, res.Lost, res.Duplicates, res.IDMismatches)
	if res.Accepted == 0 || !res.Drained {
		t.Errorf("accepted %d, drained %v", res.Accepted, res.Drained)
	}
}
