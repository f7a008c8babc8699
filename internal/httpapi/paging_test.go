package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

type listedJob struct {
	ID         int64           `json:"id"`
	QueueName  string          `json:"queue_name"`
	Category   string          `json:"category"`
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload"`
	Status     string          `json:"status"`
	CreatedAt  time.Time       `json:"created_at"`
	NextTry    time.Time       `json:"next_try"`
	Timeout    int             `json:"timeout"`
	FailCount  int             `json:"fail_count"`
	MaxRetries int             `json:"max_retries"`
	RetryDelay int             `json:"retry_delay"`
	GrabbedBy  string          `json:"grabbed_by"`
}

type failedAnswer struct {
	ID       int64           `json:"id"`
	JobID    int64           `json:"job_id"`
	Category string          `json:"category"`
	URL      string          `json:"url"`
	Payload  json.RawMessage `json:"payload"`
	Result   struct {
		Status  string `json:"status"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"result"`
	FailCount int       `json:"fail_count"`
	FailedAt  time.Time `json:"failed_at"`
	CreatedAt time.Time `json:"created_at"`
}

// pageAll follows next_cursor through a listing (path has a query string)
// and returns the items of every page.
func pageAll[T any](t *testing.T, b *bundle, path, field string, limit int) []T {
	t.Helper()
	var all []T
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatalf("%s: more than 1000 pages", path)
		}
		p := fmt.Sprintf("%s&limit=%d", path, limit)
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		var page map[string]json.RawMessage
		b.ok(t, "GET", p, "", &page)
		var items []T
		if err := json.Unmarshal(page[field], &items); err != nil || items == nil {
			t.Fatalf("%s: %s is not an array: %s (%v)", p, field, page[field], err)
		}
		if len(items) > limit {
			t.Fatalf("%s: %d items, limit %d", p, len(items), limit)
		}
		all = append(all, items...)
		var next string
		if raw, ok := page["next_cursor"]; ok {
			json.Unmarshal(raw, &next)
		}
		if next == "" {
			return all
		}
		if len(items) != limit {
			t.Fatalf("%s: a short page of %d has a next_cursor", p, len(items))
		}
		cursor = next
	}
}

func ids[T any](items []*T, id func(*T) int64) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = id(it)
	}
	return out
}

func jobID(j *listedJob) int64 { return j.ID }

func TestInspect_JobListings(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		b.ok(t, "PUT", "/queue/q", "", nil)
		b.ok(t, "PUT", "/routing/c", `{"queue_name":"q"}`, nil)
		var due, deferred []int64
		for i := range 7 {
			var j listedJob
			b.ok(t, "POST", "/job/c", fmt.Sprintf(`{"url":"http://w/%d","payload":{"i":%d},"max_retries":2,"retry_delay":3,"timeout":4}`, i, i), &j)
			due = append(due, j.ID)
		}
		for _, after := range []int{300, 100, 200} {
			var j listedJob
			b.ok(t, "POST", "/job/c", fmt.Sprintf(`{"url":"http://w/","payload":"s","run_after":%d}`, after), &j)
			deferred = append(deferred, j.ID)
		}
		ctx := context.Background()
		if _, err := b.st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 2, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			path string
			want []int64 // oldest next_try first
		}{
			{"/queue/q/grabbed", due[:2]},
			{"/queue/q/waiting", due[2:]},
			{"/queue/q/deferred", []int64{deferred[1], deferred[2], deferred[0]}},
		} {
			for _, order := range []string{"", "desc", "asc"} {
				want := slices.Clone(tc.want)
				if order != "asc" {
					slices.Reverse(want) // desc is the default
				}
				for _, limit := range []int{1, 2, 1000} {
					got := pageAll[*listedJob](t, b, tc.path+"?order="+order+"&unknown=1", "jobs", limit)
					if !slices.Equal(ids(got, jobID), want) {
						t.Errorf("%s order=%q limit=%d: got %v, want %v", tc.path, order, limit, ids(got, jobID), want)
					}
				}
			}
		}
		var page struct {
			Jobs []*listedJob `json:"jobs"`
		}
		b.ok(t, "GET", "/queue/q/grabbed?order=asc", "", &page)
		j := page.Jobs[0]
		if j.Status != "grabbed" || j.GrabbedBy != "n1" || j.Category != "c" || j.URL != "http://w/0" || string(j.Payload) != `{"i":0}` ||
			j.MaxRetries != 2 || j.RetryDelay != 3 || j.Timeout != 4 || j.QueueName != "q" || j.CreatedAt.IsZero() || j.NextTry.IsZero() {
			t.Errorf("grabbed job = %+v", j)
		}
		b.ok(t, "GET", "/queue/q/deferred?limit=1&order=asc", "", &page)
		if j := page.Jobs[0]; j.Status != "claimed" || string(j.Payload) != `"s"` || !j.NextTry.After(j.CreatedAt.Add(99*time.Second)) {
			t.Errorf("deferred job = %+v", j)
		}

		// One job: get, delete, then gone.
		var got listedJob
		b.ok(t, "GET", fmt.Sprintf("/queue/q/job/%d", due[3]), "", &got)
		if got.ID != due[3] || got.Status != "claimed" || got.URL != "http://w/3" {
			t.Errorf("GET job = %+v", got)
		}
		b.ok(t, "DELETE", fmt.Sprintf("/queue/q/job/%d", due[3]), "", &got)
		if got.ID != due[3] {
			t.Errorf("DELETE job = %+v", got)
		}
		for _, m := range []string{"GET", "DELETE"} {
			msg := errorMessage(t, b.do(t, m, fmt.Sprintf("/queue/q/job/%d", due[3]), ""), http.StatusNotFound)
			if !strings.Contains(msg, fmt.Sprint(due[3])) {
				t.Errorf("%s of a deleted job: %q", m, msg)
			}
		}
		b.ok(t, "PUT", "/queue/other", "", nil)
		errorMessage(t, b.do(t, "GET", fmt.Sprintf("/queue/other/job/%d", due[4]), ""), http.StatusNotFound)
		if got := pageAll[*listedJob](t, b, "/queue/q/waiting?", "jobs", 100); len(got) != 4 {
			t.Errorf("waiting after delete: %v", ids(got, jobID))
		}
	})
}

func TestInspect_FailedListing(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		b.ok(t, "PUT", "/queue/q", "", nil)
		b.ok(t, "PUT", "/routing/c", `{"queue_name":"q"}`, nil)
		var created []int64
		for i := range 5 {
			var j listedJob
			b.ok(t, "POST", "/job/c", fmt.Sprintf(`{"url":"http://w/%d","payload":[%d]}`, i, i), &j)
			created = append(created, j.ID)
			time.Sleep(2 * time.Millisecond)
		}
		ctx := context.Background()
		if _, err := b.st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 5, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		failOrder := []int{3, 0, 4, 1, 2}
		entries := map[int64]int64{}
		for _, i := range failOrder {
			f, err := b.st.JobFail(ctx, &store.JobFailParams{ID: created[i], Node: "n1", Status: "failure", Code: 503, Message: "down"})
			if err != nil {
				t.Fatal(err)
			}
			entries[created[i]] = f.ID
		}
		var byFailed, byCreated []int64
		for k := len(failOrder) - 1; k >= 0; k-- {
			byFailed = append(byFailed, created[failOrder[k]])
		}
		for k := len(created) - 1; k >= 0; k-- {
			byCreated = append(byCreated, created[k])
		}
		fJob := func(f *failedAnswer) int64 { return f.JobID }
		for _, tc := range []struct {
			order string
			want  []int64
		}{{"", byFailed}, {"failed", byFailed}, {"created", byCreated}} {
			for _, limit := range []int{1, 2, 100} {
				got := pageAll[*failedAnswer](t, b, "/queue/q/failed?order="+tc.order, "failed_jobs", limit)
				if !slices.Equal(ids(got, fJob), tc.want) {
					t.Errorf("order=%q limit=%d: got jobs %v, want %v", tc.order, limit, ids(got, fJob), tc.want)
				}
			}
		}
		var f failedAnswer
		b.ok(t, "GET", fmt.Sprintf("/queue/q/failed/%d", entries[created[1]]), "", &f)
		if f.JobID != created[1] || f.Category != "c" || f.URL != "http://w/1" || string(f.Payload) != "[1]" || f.Result.Status != "failure" ||
			f.Result.Code != 503 || f.Result.Message != "down" || f.FailCount != 1 || f.FailedAt.Before(f.CreatedAt) {
			t.Errorf("failed entry = %+v", f)
		}
		b.ok(t, "DELETE", fmt.Sprintf("/queue/q/failed/%d", entries[created[1]]), "", &f)
		if f.JobID != created[1] {
			t.Errorf("DELETE failed entry = %+v", f)
		}
		errorMessage(t, b.do(t, "GET", fmt.Sprintf("/queue/q/failed/%d", entries[created[1]]), ""), http.StatusNotFound)
		errorMessage(t, b.do(t, "DELETE", fmt.Sprintf("/queue/q/failed/%d", entries[created[1]]), ""), http.StatusNotFound)
		if got := pageAll[*failedAnswer](t, b, "/queue/q/failed?", "failed_jobs", 100); len(got) != 4 {
			t.Errorf("after delete: %v", ids(got, fJob))
		}
	})
}

func TestInspect_BadInput(t *testing.T) {
	t.Parallel()
	b := setupDialect(t, "sqlite", nil)
	b.ok(t, "PUT", "/queue/q", "", nil)
	var tests []badInput
	for _, l := range []string{"grabbed", "waiting", "deferred", "failed"} {
		p := "/queue/q/" + l
		tests = append(tests,
			badInput{l + "/limit zero", "GET", p + "?limit=0", "", 400, "limit"},
			badInput{l + "/limit too big", "GET", p + "?limit=1001", "", 400, "limit"},
			badInput{l + "/limit not a number", "GET", p + "?limit=ten", "", 400, "limit"},
			badInput{l + "/order", "GET", p + "?order=sideways", "", 400, "order"},
			badInput{l + "/cursor garbage", "GET", p + "?cursor=%%%", "", 400, "cursor"},
			badInput{l + "/cursor not base64", "GET", p + "?cursor=!!", "", 400, "cursor"},
			badInput{l + "/cursor of another listing", "GET", p + "?cursor=" + otherCursor(l), "", 400, "cursor"},
			badInput{l + "/bad queue name", "GET", "/queue/a%20b/" + l, "", 400, "name"},
			badInput{l + "/no such queue", "GET", "/queue/nope/" + l, "", 404, "nope"},
		)
	}
	for _, p := range []string{"/queue/q/job/", "/queue/q/failed/"} {
		for _, m := range []string{"GET", "DELETE"} {
			tests = append(tests,
				badInput{m + p + "id word", m, p + "x", "", 400, "id"},
				badInput{m + p + "id zero", m, p + "0", "", 400, "id"},
				badInput{m + p + "id negative", m, p + "-1", "", 400, "id"},
				badInput{m + p + "id too big", m, p + "99999999999999999999", "", 400, "id"},
				badInput{m + p + "no such id", m, p + "42", "", 404, "42"},
				badInput{m + p + "no such queue", m, strings.Replace(p, "/q/", "/nope/", 1) + "1", "", 404, "nope"},
			)
		}
	}
	runBadInputs(t, b, tests)
}

// otherCursor returns a well-formed cursor of a listing other than l.
func otherCursor(l string) string {
	if l == "failed" {
		return "ajoxMjM6NA" // "j:123:4", a job listing's
	}
	return "Zjo0" // "f:4", the failure log's
}

// TestInspect_PagingUnderConcurrentWrites follows next_cursor through
// 10,000 deferred jobs over HTTP while jobs are inserted and deleted: no job
// is listed twice and none that existed throughout is missed.
func TestInspect_PagingUnderConcurrentWrites(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		b.ok(t, "PUT", "/queue/q", "", nil)
		ctx := context.Background()
		var stable []int64
		for k := range 10 {
			ps := make([]*store.JobInsertParams, 1000)
			for i := range ps {
				ps[i] = &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://w/", RunAfter: time.Duration(10-k) * time.Hour}
			}
			got, err := b.st.JobsInsert(ctx, ps)
			if err != nil {
				t.Fatal(err)
			}
			stable = append(stable, got...)
		}
		doomed := map[int64]bool{}
		for i := 0; i < len(stable); i += 7 {
			doomed[stable[i]] = true
		}
		stop, started := make(chan struct{}), make(chan struct{})
		writerDone := make(chan error, 1)
		go func() {
			defer func() {
				select {
				case <-started:
				default:
					close(started) // the writer failed before its first write
				}
			}()
			i := 0
			for id := range doomed {
				select {
				case <-stop:
					writerDone <- nil
					return
				default:
				}
				if _, err := b.st.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://w/", RunAfter: time.Duration(i%11+1) * time.Hour}}); err != nil {
					writerDone <- err
					return
				}
				if _, err := b.st.JobDelete(ctx, "q", id); err != nil {
					writerDone <- err
					return
				}
				if i == 0 {
					close(started)
				}
				i++
			}
			writerDone <- nil
		}()
		<-started
		for _, order := range []string{"asc", "desc"} {
			got := pageAll[*listedJob](t, b, "/queue/q/deferred?order="+order, "jobs", 500)
			seen := map[int64]bool{}
			for _, j := range got {
				if seen[j.ID] {
					t.Fatalf("order=%s: job %d listed twice", order, j.ID)
				}
				seen[j.ID] = true
			}
			for _, id := range stable {
				if !doomed[id] && !seen[id] {
					t.Fatalf("order=%s: job %d existed throughout but was not listed", order, id)
				}
			}
		}
		close(stop)
		if err := <-writerDone; err != nil {
			t.Fatal(err)
		}
	})
}

// TestQueues_Paging: GET /queues answers every queue, as Fireworq does;
// with limit it answers a page, and a Link header names the next one until
// the last page; a bad limit or cursor is refused naming the parameter.
func TestQueues_Paging(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		var want []string
		for i := range 7 {
			name := fmt.Sprintf("p%d", i)
			b.ok(t, "PUT", "/queue/"+name, `{}`, nil)
			want = append(want, name)
		}
		var all []struct{ Name string }
		b.ok(t, "GET", "/queues", "", &all)
		var names []string
		for _, q := range all {
			if strings.HasPrefix(q.Name, "p") {
				names = append(names, q.Name)
			}
		}
		if !slices.Equal(names, want) {
			t.Fatalf("GET /queues names %v, want %v among them", names, want)
		}
		total := len(all)
		var paged []string
		path, pages := "/queues?limit=3", 0
		for path != "" {
			res := b.do(t, "GET", path, "")
			if res.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, res.status, res.body)
			}
			var page []struct{ Name string }
			if err := json.Unmarshal(res.body, &page); err != nil || len(page) > 3 {
				t.Fatalf("GET %s: %s (%v)", path, res.body, err)
			}
			for _, q := range page {
				paged = append(paged, q.Name)
			}
			pages++
			path = ""
			if link := res.header.Get("Link"); link != "" {
				next, ok := strings.CutSuffix(strings.TrimPrefix(link, "<"), `>; rel="next"`)
				if !ok {
					t.Fatalf("Link: %q", link)
				}
				path = next
			}
		}
		if len(paged) != total || pages != (total+2)/3 || !slices.IsSorted(paged) {
			t.Fatalf("pages of 3 gave %v in %d pages, want the %d queues in order", paged, pages, total)
		}
		if msg := errorMessage(t, b.do(t, "GET", "/queues?limit=0", ""), http.StatusBadRequest); !strings.HasPrefix(msg, "limit:") {
			t.Errorf("limit=0: %q", msg)
		}
		if msg := errorMessage(t, b.do(t, "GET", "/queues?cursor=xyz", ""), http.StatusBadRequest); !strings.HasPrefix(msg, "cursor:") {
			t.Errorf("cursor=xyz: %q", msg)
		}
	})
}
