package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/chaos"
	"github.com/rowq/rowq/internal/store/backend"
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
		// just killed) has no tables, and one taken while the only node
		// was down and its replacement not yet up has no nodes (it failed
		// once so on a loaded machine: failover 2.5 s); one sample at
		// least must have each.
		delivered, sized, withNodes := 0, 0, 0
		for _, s := range res.Samples {
			delivered += s.Delivered
			if slices.ContainsFunc(s.Tables, func(t *chaos.TableSample) bool { return t.Name == "jobs" && t.Bytes > 0 }) {
				sized++
			}
			if len(s.Nodes) > 0 {
				withNodes++
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
		if withNodes == 0 {
			t.Errorf("no sample had a node; want each node's memory and goroutines")
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

// TestChaos_NodeDatabasesAndDBFault runs the chaos suite on MariaDB with a
// database URL per node (the same database, the second URL with a driver
// parameter, so that the nodes' logs tell them apart) and a db fault whose
// command only leaves a mark: every node must have been given its URL, the
// fault run once and its window measured, every delivered id be the one
// answered, and the kill's reap read from the logs and classed killed,
// with no reap of a live node (one MariaDB server: its session locks hold).
func TestChaos_NodeDatabasesAndDBFault(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t, "mysql")
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	u2 := u + sep + "timeout=7s"
	dir := t.TempDir()
	mark := filepath.Join(dir, "db-fault.txt")
	cmd := exec.Command(rowqBin, "chaos", "--node-database-url", u, "--node-database-url", u2, "--dir", dir,
		"--nodes", "2", "--rate", "100", "--duration", "10s", "--faults", "kill,db", "--every", "3s",
		"--db-fault-cmd", "echo fault >> "+mark+"; sleep 1",
		"--node-ttl", "2s", "--grab-lease", "3s", "--refresh-interval", "200ms", "--rescue-interval", "500ms",
		"--lock-clients", "0", "--schedule=false", "--settle", "1s")
	cmd.Env = baseEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rowq chaos: %v\nstdout: %s\nstderr:\n%s", err, out, stderr.String())
	}
	var res chaos.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	t.Logf("%s", out)
	// The report and the nodes' logs hide a password.
	u, u2 = backend.Redact(u), backend.Redact(u2)
	if res.Database != "mysql" || !slices.Equal(res.NodeDatabaseURLs, []string{u, u2}) {
		t.Errorf("database %q, node_database_urls %q; want mysql, [%s %s]", res.Database, res.NodeDatabaseURLs, u, u2)
	}
	// Each node logs the database it serves from at start: node i the
	// i-th URL, a replacement its victim's, so both URLs stay in use.
	for i, want := range []string{u, u2} {
		if got := servingDatabase(t, dir, fmt.Sprintf("-%d.log", i+1)); got != want {
			t.Errorf("node %d serves from %q, want %q", i+1, got, want)
		}
	}
	if b, err := os.ReadFile(mark); err != nil || strings.Count(string(b), "fault\n") != res.DBFaults {
		t.Errorf("the fault command left %q (%v); want one line per db fault (%d)", b, err, res.DBFaults)
	}
	if res.DBFaults != 1 || res.DBFaultErrors != 0 {
		t.Errorf("db_faults %d, db_fault_errors %d; want 1, 0", res.DBFaults, res.DBFaultErrors)
	}
	// The command harms nothing: deliveries go on in its window, so its
	// longest gap is short of the window (1 s of command, DBGapAfter after).
	if g := res.DBGapMS; g == nil || g.N != 1 || g.Max <= 0 || g.Max >= (time.Second+chaos.DBGapAfter).Milliseconds() {
		t.Errorf("db_gap_ms = %+v; want one gap, above 0 and short of the window", g)
	}
	if res.DBResumeMS == nil || res.DBResumeMS.N != 1 {
		t.Errorf("db_resume_ms = %+v; want one", res.DBResumeMS)
	}
	if res.Accepted == 0 || res.Lost != 0 || !res.Drained || res.IDsChecked != res.Delivered || res.IDMismatches != 0 {
		t.Errorf("accepted %d, delivered %d, lost %d, drained %v, ids checked %d, id mismatches %d; want every job delivered under its id",
			res.Accepted, res.Delivered, res.Lost, res.Drained, res.IDsChecked, res.IDMismatches)
	}
	if r := res.Reaps; res.Kills == 0 || r == nil || r.Killed == 0 || r.Live != 0 || r.Stopped != 0 || r.CutOff != 0 {
		t.Errorf("kills %d, reaps %+v; want the killed node's reap, no other", res.Kills, r)
	}
}

// servingDatabase returns the database of the "rowq serving" line in the
// node log in dir whose name ends with suffix.
func servingDatabase(t *testing.T, dir, suffix string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "chaos-*"+suffix))
	if len(logs) != 1 {
		t.Fatalf("node logs ending %s in %s: %q, want one", suffix, dir, logs)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		var l struct {
			Msg      string `json:"msg"`
			Database string `json:"database"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "rowq serving" {
			return l.Database
		}
	}
	t.Fatalf("no rowq serving line in %s", logs[0])
	return ""
}
