package main_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/chaos"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// TestChaos_OneKillLosesNoJob runs the chaos suite itself for a few
// seconds on each database: one node, a light load, one SIGKILL of that
// node, which leads the queue and has fired every tick of the schedule so
// far (a second node would share the ticks by chance, and might fire none
// before the kill), and a replacement started at once; a sample every 3 s.
// It checks the report's correctness (nothing lost, the kill and its
// failover measured, the killed node one that fired the schedule, the lock
// and schedule checks clean, no tick lost or doubled across the kill, the
// samples taken), not its timings.
func TestChaos_OneKillLosesNoJob(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		cmd := exec.Command(rowqBin, "chaos", "--database-url", dbtest.URL(t, dialect), "--dir", t.TempDir(),
			"--nodes", "1", "--rate", "100", "--duration", "8s", "--faults", "kill", "--every", "5s",
			"--node-ttl", "2s", "--grab-lease", "3s", "--refresh-interval", "200ms", "--rescue-interval", "500ms",
			"--settle", "1s", "--node-log-level", "warn", "--sample", "3s")
		cmd.Env = baseEnv()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("rowq chaos: %v\nstdout: %s\nstderr:\n%s", err, out, stderr.String())
		}
		if n := strings.Count(strings.TrimSpace(string(out)), "\n"); n != 0 {
			t.Fatalf("rowq chaos printed %d lines, want one:\n%s", n+1, out)
		}
		var res chaos.Result
		if err := json.Unmarshal(out, &res); err != nil {
			t.Fatalf("decode %s: %v", out, err)
		}
		t.Logf("%s", out)
		if res.Accepted == 0 || res.Lost != 0 || res.Delivered != res.Accepted || !res.Drained {
			t.Errorf("accepted %d, delivered %d, lost %d, drained %v; want every accepted job delivered",
				res.Accepted, res.Delivered, res.Lost, res.Drained)
		}
		if res.Kills != 1 || res.FailoverMS == nil || res.FailoverMS.N != 1 {
			t.Errorf("kills %d, failover %+v; want one kill and its failover measured", res.Kills, res.FailoverMS)
		}
		if res.Lock == nil || res.Lock.Acquisitions == 0 || res.Lock.DoubleHolds != 0 || res.Lock.TokensNotIncreasing != 0 {
			t.Errorf("lock check %+v; want acquisitions, no double hold, tokens increasing", res.Lock)
		}
		if res.RefusedWithoutRetryAfter != 0 {
			t.Errorf("%d enqueues refused without Retry-After", res.RefusedWithoutRetryAfter)
		}
		// A sample whose table query failed (a loaded machine, a node
		// just killed) has no tables; one sample at least must have them.
		delivered, sized := 0, 0
		for _, s := range res.Samples {
			delivered += s.Delivered
			if slices.ContainsFunc(s.Tables, func(t *chaos.TableSample) bool { return t.Name == "jobs" && t.Bytes > 0 }) {
				sized++
			}
			if len(s.Nodes) == 0 {
				t.Errorf("sample at %.0f s: no nodes; want each node's memory and goroutines", s.AtS)
			}
			for _, n := range s.Nodes {
				if n.RSSMB <= 0 || n.Goroutines <= 0 {
					t.Errorf("sample at %.0f s: node %+v; want its memory and goroutines", s.AtS, n)
				}
			}
		}
		if sized == 0 {
			t.Errorf("no sample sized the jobs table")
		}
		if len(res.Samples) < 2 || delivered == 0 {
			t.Errorf("%d samples counting %d deliveries; want 2 or more over 8 s, with deliveries", len(res.Samples), delivered)
		}
		if res.Schedule == nil || res.Schedule.Runs == 0 || res.Schedule.Lost != 0 || res.Schedule.Doubled != 0 {
			t.Errorf("schedule check %+v; want runs, none lost or doubled", res.Schedule)
		}
		if res.Schedule != nil && res.Schedule.KilledFirers != res.Kills {
			t.Errorf("%d of %d killed nodes had fired the schedule; want every one", res.Schedule.KilledFirers, res.Kills)
		}
	})
}
