package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestClassifyReaps: a reap is killed when the reaped node was SIGKILLed
// before it, stopped while the node was SIGSTOPped (or just continued),
// cut_off in a database fault's window when the node's database did not
// answer the probes, and live otherwise.
func TestClassifyReaps(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	kills := []*killRecord{{node: "k", at: at(10)}}
	stops := []*stopRecord{{node: "s", at: at(20), cont: at(25)}, {node: "s2", at: at(40)}} // s2 never continued
	faults := []*dbFaultRecord{{at: at(50), done: at(55), down: map[string]bool{"mysql://m3": true}}}
	nodeURL := map[string]string{"k": "mysql://m1", "s": "mysql://m2", "s2": "mysql://m2", "c": "mysql://m3", "l": "mysql://m1"}

	for _, tc := range []struct {
		name string
		reap reapEvent
		want ReapResult
	}{
		{"killed, reaped after the kill", reapEvent{at: at(12), dead: "k"}, ReapResult{Killed: 1}},
		{"killed, but reaped before the kill", reapEvent{at: at(9), dead: "k"}, ReapResult{Live: 1}},
		{"stopped, reaped while stopped", reapEvent{at: at(22), dead: "s"}, ReapResult{Stopped: 1}},
		{"stopped, reaped just after the SIGCONT", reapEvent{at: at(26), dead: "s"}, ReapResult{Stopped: 1}},
		{"stopped, reaped long after the SIGCONT", reapEvent{at: at(35), dead: "s"}, ReapResult{Live: 1}},
		{"stopped, reaped before the SIGSTOP", reapEvent{at: at(19), dead: "s"}, ReapResult{Live: 1}},
		{"stopped to the end", reapEvent{at: at(48), dead: "s2"}, ReapResult{Stopped: 1}},
		{"cut off, its database down in the fault", reapEvent{at: at(52), dead: "c"}, ReapResult{CutOff: 1}},
		{"cut off, in the window after the fault", reapEvent{at: at(64), dead: "c"}, ReapResult{CutOff: 1}},
		{"its database down, but after the window", reapEvent{at: at(66), dead: "c"}, ReapResult{Live: 1}},
		{"its database down, but before the fault", reapEvent{at: at(49), dead: "c"}, ReapResult{Live: 1}},
		{"in the fault, its database up", reapEvent{at: at(52), dead: "l"}, ReapResult{Live: 1}},
		{"a node the run never knew", reapEvent{at: at(52), dead: "x"}, ReapResult{Live: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classifyReaps([]reapEvent{tc.reap}, kills, stops, faults, nodeURL, t0)
			if got.Killed != tc.want.Killed || got.Stopped != tc.want.Stopped || got.CutOff != tc.want.CutOff || got.Live != tc.want.Live {
				t.Errorf("classifyReaps = %+v, want %+v", *got, tc.want)
			}
		})
	}
}

func TestClassifyReaps_LiveEach(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	got := classifyReaps([]reapEvent{{at: t0.Add(2500 * time.Millisecond), by: "a", dead: "b"}}, nil, nil, nil, nil, t0)
	if want := []string{"b reaped by a at 2.5 s"}; !slices.Equal(got.LiveEach, want) {
		t.Errorf("live_each = %q, want %q", got.LiveEach, want)
	}
}

// TestReadReaps reads the reaps from JSON logs, skipping the lines that
// are no reap or no JSON, in time order across the logs.
func TestReadReaps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, lines ...string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	logs := map[string]string{
		"a": write("a.log",
			`{"time":"2026-12-04T12:00:03.5Z","level":"INFO","msg":"node's database session ended; its queues and grabbed jobs are taken over","dead_node":"c"}`,
			`{"time":"2026-12-04T12:00:04Z","level":"INFO","msg":"leading","queue":"q"}`,
			`panic: not JSON`,
		),
		"b": write("b.log",
			`{"time":"2026-12-04T12:00:01Z","level":"INFO","msg":"node's database session ended; its queues and grabbed jobs are taken over","dead_node":"a"}`,
		),
	}
	got, err := readReaps(logs)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	want := []reapEvent{{at: t0.Add(time.Second), by: "b", dead: "a"}, {at: t0.Add(3500 * time.Millisecond), by: "a", dead: "c"}}
	if !slices.EqualFunc(got, want, func(x, y reapEvent) bool { return x.at.Equal(y.at) && x.by == y.by && x.dead == y.dead }) {
		t.Errorf("readReaps = %+v, want %+v", got, want)
	}
	logs["gone"] = filepath.Join(dir, "missing.log")
	if got, err := readReaps(logs); err == nil || len(got) != 2 {
		t.Errorf("readReaps with a missing log = %d reaps, %v; want the 2 others and an error", len(got), err)
	}
}
