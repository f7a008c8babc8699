package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
)

type scheduleOut struct {
	Name       string          `json:"name"`
	Cron       string          `json:"cron"`
	Timezone   string          `json:"timezone"`
	Payload    json.RawMessage `json:"payload"`
	Misfire    string          `json:"misfire"`
	MaxCatchup int             `json:"max_catchup"`
	Overlap    string          `json:"overlap"`
	Paused     bool            `json:"paused"`
	NextRunAt  *time.Time      `json:"next_run_at"`
	NextRuns   []struct {
		Local  string `json:"local"`
		UTC    string `json:"utc"`
		Paused bool   `json:"paused"`
	} `json:"next_runs"`
}

type runOut struct {
	ID      int64     `json:"id"`
	Kind    string    `json:"kind"`
	Tick    time.Time `json:"tick"`
	JobID   *int64    `json:"job_id"`
	Queue   string    `json:"queue_name"`
	Skipped bool      `json:"skipped"`
}

// TestSchedule_Lifecycle walks a schedule through the API on each
// database: created with its defaults and next runs, put again, listed a
// page at a time, paused and resumed, triggered and its runs listed, and
// deleted. Each step finds the schedules as the ones before left them.
func TestSchedule_Lifecycle(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, func(o *options) { o.enq.DefaultQueue = "q" })
		b.ok(t, "PUT", "/queue/q", `{}`, nil)
		sc := lifecycleCreate(t, b)
		lifecycleReput(t, b, sc)
		listed := lifecycleList(t, b)
		lifecyclePauseResume(t, b, sc)
		runsCursor := lifecycleRuns(t, b)
		lifecycleForeignCursors(t, b, listed, runsCursor)
		lifecycleDelete(t, b)
	})
}

// lifecycleCreate puts the schedule nightly and checks its defaults and
// next runs; it returns the schedule as the API answered.
func lifecycleCreate(t *testing.T, b *bundle) scheduleOut {
	t.Helper()
	var sc scheduleOut
	b.ok(t, "PUT", "/schedule/nightly", `{"cron":"30 2 * * *","timezone":"America/New_York","category":"report",
			"url":"http://127.0.0.1:1/work","payload":{"k":"v"}}`, &sc)
	if sc.Timezone != "America/New_York" || sc.Misfire != "once" || sc.MaxCatchup != 100 || sc.Overlap != "allow" || sc.Paused {
		t.Errorf("defaults: %+v", sc)
	}
	if string(sc.Payload) != `{"k":"v"}` {
		t.Errorf("payload = %s", sc.Payload)
	}
	if sc.NextRunAt == nil || !sc.NextRunAt.After(time.Now().Add(-time.Minute)) {
		t.Fatalf("next_run_at = %v, want a coming time", sc.NextRunAt)
	}
	if len(sc.NextRuns) != 5 || sc.NextRuns[0].UTC != sc.NextRunAt.UTC().Format(time.RFC3339) {
		t.Fatalf("next_runs = %+v, want 5 starting at next_run_at", sc.NextRuns)
	}
	for _, nr := range sc.NextRuns {
		local, err := time.Parse(time.RFC3339, nr.Local)
		if err != nil {
			t.Fatal(err)
		}
		// 02:30 local, or 03:00 on a spring-forward day.
		if hm := local.Format("15:04"); hm != "02:30" && hm != "03:00" {
			t.Errorf("next run %s is not at 02:30 New York time", nr.Local)
		}
		if u, _ := time.Parse(time.RFC3339, nr.UTC); !u.Equal(local) {
			t.Errorf("local %s and utc %s differ", nr.Local, nr.UTC)
		}
	}
	return sc
}

// lifecycleReput puts nightly again, then the paused schedule every.
// The same spec again keeps its place; a new spec moves it.
func lifecycleReput(t *testing.T, b *bundle, sc scheduleOut) {
	t.Helper()
	var again scheduleOut
	b.ok(t, "PUT", "/schedule/nightly", `{"cron":"30 2 * * *","timezone":"America/New_York","category":"report","url":"http://127.0.0.1:1/work"}`, &again)
	if !again.NextRunAt.Equal(*sc.NextRunAt) || again.Payload != nil {
		t.Errorf("re-put: next_run_at %v (want %v), payload %s (want none)", again.NextRunAt, sc.NextRunAt, again.Payload)
	}
	b.ok(t, "PUT", "/schedule/every", `{"cron":"@every 1h","category":"report","url":"http://127.0.0.1:1/work","paused":true}`, nil)
}

// lifecycleList lists the two schedules a page at a time, then on one
// page, and returns the name of the first schedule of that page.
func lifecycleList(t *testing.T, b *bundle) string {
	t.Helper()
	var page struct {
		Schedules  []scheduleOut `json:"schedules"`
		NextCursor string        `json:"next_cursor"`
	}
	b.ok(t, "GET", "/schedules?limit=1", "", &page)
	if len(page.Schedules) != 1 || page.Schedules[0].Name != "every" || page.NextCursor == "" {
		t.Fatalf("first page = %+v", page)
	}
	// Paused: nothing is due, and next_runs are the runs it would
	// have if resumed now, each marked paused.
	if ev := page.Schedules[0]; !ev.Paused || ev.NextRunAt != nil || len(ev.NextRuns) != 5 {
		t.Errorf("a paused schedule: %+v, want next_run_at null and 5 next_runs", ev)
	} else {
		first, _ := time.Parse(time.RFC3339, ev.NextRuns[0].UTC)
		if d := time.Until(first); d <= 0 || d > time.Hour {
			t.Errorf("paused @every 1h: first next run %s, want within the hour after now", ev.NextRuns[0].UTC)
		}
		for _, nr := range ev.NextRuns {
			if !nr.Paused {
				t.Errorf("next run %+v of a paused schedule is not marked paused", nr)
			}
		}
	}
	cursor := page.NextCursor
	page.NextCursor = ""
	b.ok(t, "GET", "/schedules?limit=1&cursor="+cursor, "", &page)
	if len(page.Schedules) != 1 || page.Schedules[0].Name != "nightly" || page.NextCursor != "" {
		t.Fatalf("second (last) page = %+v", page)
	}
	b.ok(t, "GET", "/schedules?limit=2", "", &page)
	if len(page.Schedules) != 2 || page.NextCursor != "" {
		t.Fatalf("one full page = %+v, want both schedules and no next_cursor", page)
	}
	return page.Schedules[0].Name
}

// lifecyclePauseResume pauses nightly, whose next_runs stay those of the
// running schedule sc, and resumes it.
func lifecyclePauseResume(t *testing.T, b *bundle, sc scheduleOut) {
	t.Helper()
	var paused, resumed scheduleOut
	b.ok(t, "POST", "/schedule/nightly/pause", "", &paused)
	if !paused.Paused || paused.NextRunAt != nil {
		t.Errorf("paused = %+v", paused)
	}
	// A daily tick far from now: resuming would keep the same runs.
	if len(paused.NextRuns) != 5 || paused.NextRuns[0].Local != sc.NextRuns[0].Local && time.Until(*sc.NextRunAt) > time.Minute {
		t.Errorf("paused next_runs = %+v, want those of the running schedule %+v", paused.NextRuns, sc.NextRuns)
	}
	b.ok(t, "POST", "/schedule/nightly/resume", "", &resumed)
	if resumed.Paused || resumed.NextRunAt == nil {
		t.Errorf("resumed = %+v", resumed)
	}
}

// lifecycleRuns triggers nightly twice and lists its runs, a page at a
// time; it returns the cursor of the runs' first page.
func lifecycleRuns(t *testing.T, b *bundle) string {
	t.Helper()
	var run runOut
	b.ok(t, "POST", "/schedule/nightly/trigger", "", &run)
	if run.Kind != "trigger" || run.JobID == nil || run.Queue != "q" || run.Skipped {
		t.Fatalf("trigger = %+v", run)
	}
	var runs struct {
		Runs       []runOut `json:"runs"`
		NextCursor string   `json:"next_cursor"`
	}
	b.ok(t, "GET", "/schedule/nightly/runs", "", &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != run.ID || *runs.Runs[0].JobID != *run.JobID || runs.NextCursor != "" {
		t.Errorf("runs = %+v", runs)
	}
	// Paging, newest first: limit 1 over two runs.
	var run2 runOut
	b.ok(t, "POST", "/schedule/nightly/trigger", "", &run2)
	b.ok(t, "GET", "/schedule/nightly/runs?limit=1", "", &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != run2.ID || runs.NextCursor == "" {
		t.Fatalf("runs page 1 = %+v, want run %d and a next_cursor", runs, run2.ID)
	}
	cursor := runs.NextCursor
	runs.NextCursor = ""
	b.ok(t, "GET", "/schedule/nightly/runs?limit=1&cursor="+cursor, "", &runs)
	if len(runs.Runs) != 1 || runs.Runs[0].ID != run.ID || runs.NextCursor != "" {
		t.Fatalf("runs page 2 = %+v, want run %d and no next_cursor", runs, run.ID)
	}
	return cursor
}

// lifecycleForeignCursors sends each listing what is not its cursor
// (a schedule's name to the runs, the runs' cursor to the schedules).
// A cursor of another listing is refused, naming cursor.
func lifecycleForeignCursors(t *testing.T, b *bundle, listed, runsCursor string) {
	t.Helper()
	for _, path := range []string{"/schedule/nightly/runs?cursor=" + listed, "/schedules?cursor=" + runsCursor} {
		if msg := errorMessage(t, b.do(t, "GET", path, ""), http.StatusBadRequest); !strings.HasPrefix(msg, "cursor:") {
			t.Errorf("GET %s: error %q does not name cursor", path, msg)
		}
	}
}

// lifecycleDelete deletes nightly; then it, its runs and its actions are
// not found.
func lifecycleDelete(t *testing.T, b *bundle) {
	t.Helper()
	var gone scheduleOut
	b.ok(t, "DELETE", "/schedule/nightly", "", &gone)
	for _, path := range []string{"/schedule/nightly", "/schedule/nightly/runs"} {
		if msg := errorMessage(t, b.do(t, "GET", path, ""), http.StatusNotFound); !strings.HasPrefix(msg, "name:") {
			t.Errorf("GET %s after delete: %q", path, msg)
		}
	}
	for _, action := range []string{"pause", "resume", "trigger"} {
		errorMessage(t, b.do(t, "POST", "/schedule/nightly/"+action, ""), http.StatusNotFound)
	}
	errorMessage(t, b.do(t, "DELETE", "/schedule/nightly", ""), http.StatusNotFound)
}

func TestSchedule_TriggerUnroutable(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), nil) // no default queue
	b.ok(t, "PUT", "/schedule/s", `{"cron":"@daily","category":"nowhere","url":"http://127.0.0.1:1/"}`, nil)
	msg := errorMessage(t, b.do(t, "POST", "/schedule/s/trigger", ""), http.StatusNotFound)
	if !strings.HasPrefix(msg, "category:") || !strings.Contains(msg, "nowhere") {
		t.Errorf("unroutable trigger: %q", msg)
	}
}

func TestSchedule_BadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), nil)
	const ok = `"category":"c","url":"http://127.0.0.1:1/"`
	for _, tc := range []struct {
		name, path, body, field string
	}{
		{"NoCron", "/schedule/s", `{` + ok + `}`, "cron:"},
		{"BadCron", "/schedule/s", `{"cron":"* * *",` + ok + `}`, "cron:"},
		{"BadField", "/schedule/s", `{"cron":"61 * * * *",` + ok + `}`, "cron:"},
		{"NeverFires", "/schedule/s", `{"cron":"0 0 30 2 *",` + ok + `}`, "cron:"},
		{"ZeroInterval", "/schedule/s", `{"cron":"@every 0s",` + ok + `}`, "cron:"},
		{"NegativeInterval", "/schedule/s", `{"cron":"@every -1m",` + ok + `}`, "cron:"},
		{"UnknownZone", "/schedule/s", `{"cron":"@daily","timezone":"Mars/Olympus",` + ok + `}`, "timezone:"},
		{"LocalZone", "/schedule/s", `{"cron":"@daily","timezone":"Local",` + ok + `}`, "timezone:"},
		{"Misfire", "/schedule/s", `{"cron":"@daily","misfire":"sometimes",` + ok + `}`, "misfire:"},
		{"Overlap", "/schedule/s", `{"cron":"@daily","overlap":"forbid",` + ok + `}`, "overlap:"},
		{"MaxCatchup", "/schedule/s", `{"cron":"@daily","max_catchup":0,` + ok + `}`, "max_catchup:"},
		{"MaxRetries", "/schedule/s", `{"cron":"@daily","max_retries":-1,` + ok + `}`, "max_retries:"},
		{"Category", "/schedule/s", `{"cron":"@daily","category":"a b","url":"http://x/"}`, "category:"},
		{"URL", "/schedule/s", `{"cron":"@daily","category":"c","url":"ftp://x/"}`, "url:"},
		{"UnknownField", "/schedule/s", `{"cron":"@daily","every":5,` + ok + `}`, "every:"},
		{"WrongType", "/schedule/s", `{"cron":5,` + ok + `}`, "cron:"},
		{"Name", "/schedule/a%20b", `{"cron":"@daily",` + ok + `}`, "name:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := errorMessage(t, b.do(t, "PUT", tc.path, tc.body), http.StatusBadRequest)
			if !strings.HasPrefix(msg, tc.field) {
				t.Errorf("error %q does not start with %q", msg, tc.field)
			}
		})
	}
	for _, path := range []string{"/schedules?limit=0", "/schedules?limit=x", "/schedule/s/runs?limit=5000", "/schedule/s/runs?cursor=x", "/schedules?cursor=%zz"} {
		errorMessage(t, b.do(t, "GET", path, ""), http.StatusBadRequest)
	}
}

// TestSchedule_CheckedAgainstItsQueue: a schedule's url and concurrency
// key are checked against the queue its category routes to now; a
// category that routes nowhere is refused only without a url.
func TestSchedule_CheckedAgainstItsQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), nil) // no default queue
	b.ok(t, "PUT", "/queue/push", "", nil)
	b.ok(t, "PUT", "/queue/pull", `{"delivery":"pull"}`, nil)
	b.ok(t, "PUT", "/routing/pushed", `{"queue_name":"push"}`, nil)
	b.ok(t, "PUT", "/routing/pulled", `{"queue_name":"pull"}`, nil)
	const url = `"url":"http://127.0.0.1:1/"`
	for _, tc := range []struct {
		name, body, field string // field "" for 200
	}{
		{"PushWithURL", `"category":"pushed",` + url, ""},
		{"PushWithoutURL", `"category":"pushed"`, "url:"},
		{"PushWithKey", `"category":"pushed","concurrency_key":"k",` + url, ""},
		{"PullWithoutURL", `"category":"pulled"`, ""},
		{"PullWithKey", `"category":"pulled","concurrency_key":"k"`, "concurrency_key:"},
		{"PullWithURLAndKey", `"category":"pulled","concurrency_key":"k",` + url, "concurrency_key:"},
		{"NowhereWithoutURL", `"category":"nowhere"`, "url:"},
		{"NowhereWithKey", `"category":"nowhere","concurrency_key":"k",` + url, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.do(t, "PUT", "/schedule/"+tc.name, `{"cron":"@daily",`+tc.body+`}`)
			if tc.field == "" {
				if res.status != http.StatusOK {
					t.Errorf("status %d, want 200; body %s", res.status, res.body)
				}
				return
			}
			if msg := errorMessage(t, res, http.StatusBadRequest); !strings.HasPrefix(msg, tc.field) {
				t.Errorf("error %q does not start with %q", msg, tc.field)
			}
		})
	}
}

// FuzzSchedule_Put sends arbitrary cron specs and zones: the answer is a
// 200 or a 400 naming the field, never a 5xx.
func FuzzSchedule_Put(f *testing.F) {
	for _, s := range []string{"* * * * *", "0 0 30 2 *", "@every 1s", "@every 0s", "*/0 * * * *", "1-2/3,4 5 ? jan-dec sun-sat", "@daily", "0 0 0 1 1 1"} {
		f.Add(s, "Europe/Berlin")
	}
	f.Add("@hourly", "../../etc/passwd")
	st := dbtest.Open(f, "sqlite")
	b := setup(f, st, nil)
	f.Fuzz(func(t *testing.T, cron, zone string) {
		body, _ := json.Marshal(map[string]any{"cron": cron, "timezone": zone, "category": "c", "url": "http://127.0.0.1:1/"})
		res := b.do(t, "PUT", "/schedule/fuzz", string(body))
		switch res.status {
		case http.StatusOK:
		case http.StatusBadRequest:
			if msg := errorMessage(t, res, http.StatusBadRequest); !strings.HasPrefix(msg, "cron:") && !strings.HasPrefix(msg, "timezone:") {
				t.Errorf("400 for cron %q zone %q does not name the field: %q", cron, zone, msg)
			}
		default:
			t.Fatalf("cron %q zone %q: status %d %s", cron, zone, res.status, res.body)
		}
	})
}
