package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// flowFixture is what addFlows stored beside setup's: queue hist, which
// keeps its finished jobs, with one that succeeded with a result and one
// that failed for good; and a batch of A (hist, with on_success), B
// (hist, waits for A, fails if A does) and C (mail, waits for A).
type flowFixture struct {
	done, failed int64
	a, b, c      int64
	batch        int64
}

func addFlows(t *testing.T, st store.Store) *flowFixture {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := st.QueuePut(ctx, &store.Queue{Name: "hist", PollingInterval: 200, MaxWorkers: 5, KeepFinished: 3600})
	must(err)
	job := func(queue, category, payload string) *store.JobInsertParams {
		return &store.JobInsertParams{Queue: queue, Category: category, URL: "http://127.0.0.1:1/", Payload: json.RawMessage(payload)}
	}
	ids, err := st.JobsInsert(ctx, []*store.JobInsertParams{job("hist", "report", `{"n":1}`), job("hist", "report", `{"n":2}`)})
	must(err)
	_, err = st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "hist", Node: "n1", Limit: 2, Lease: time.Minute})
	must(err)
	_, err = st.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids[:1], Keep: []store.FinishNote{
		{ID: ids[0], Message: "<b>done</b>", Result: json.RawMessage(`{"rows":["<script>alert(1)</script>"]}`)}}})
	must(err)
	_, err = st.JobFail(ctx, &store.JobFailParams{ID: ids[1], Node: "n1", Status: "permanent-failure", Code: 500, Message: "boom", Keep: true})
	must(err)
	fi, err := st.JobsInsertFlow(ctx, &store.FlowInsertParams{
		Jobs: []*store.FlowJobParams{
			{Job: job("hist", "a", `{"step":"a"}`), OnSuccess: job("hist", "cb", "")},
			{Job: job("hist", "b", `{"step":"b"}`), DependsOn: []store.FlowParent{{Index: 0}}, OnParentFailure: store.ParentFailureFail},
			{Job: job("mail", "c", `{"step":"c"}`), DependsOn: []store.FlowParent{{Index: 0}}},
		},
		Batch: &store.BatchParams{Meta: json.RawMessage(`{"who":"<i>ada</i>"}`), OnFinish: job("hist", "all-done", "")},
	})
	must(err)
	return &flowFixture{done: ids[0], failed: ids[1], a: fi.IDs[0], b: fi.IDs[1], c: fi.IDs[2], batch: fi.BatchID}
}

// noRaw fails if a page holds user text unescaped.
func noRaw(t *testing.T, page, body string) {
	t.Helper()
	for _, raw := range []string{"<script>alert", "<b>done", "<i>ada"} {
		if strings.Contains(body, raw) {
			t.Errorf("%s: %q reached the page unescaped", page, raw)
		}
	}
}

// TestDashboard_Lifecycle: a queue's page shows its history with results
// (or how to keep one) and its blocked jobs with their parents; a job's
// page shows a live job's flow, linked, or a finished job's history row;
// the batches' pages show their progress, before and after a job ends.
func TestDashboard_Lifecycle(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			b := setup(t, dialect)
			f := addFlows(t, b.st)
			jobPath := func(q string, id int64) string { return fmt.Sprintf("/ui/queue/%s/job/%d", q, id) }
			link := func(q, mark string, id int64) string {
				return fmt.Sprintf(`<a href="%s" data-mark="%s">%d</a>`, jobPath(q, id), mark, id)
			}

			body := b.get(t, "/ui/queue/hist", http.StatusOK)
			contains(t, "/ui/queue/hist", body, `Kept for 3600 s`,
				link("hist", "finished", f.done), link("hist", "finished", f.failed),
				`<td class="succeeded" data-mark="status">succeeded</td>`, `<td class="failed" data-mark="status">failed</td>`,
				`&lt;b&gt;done&lt;/b&gt;`, `{&#34;rows&#34;:[&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;]}`, `boom`,
				link("hist", "blocked", f.b), `<td>`+link("hist", "parent", f.a)+`</td>`)
			noRaw(t, "/ui/queue/hist", body)
			if strings.Contains(body, `id="blocked-`+fmt.Sprint(f.a)+`"`) {
				t.Error("/ui/queue/hist lists A, which waits for nothing, as blocked")
			}
			body = b.get(t, "/ui/queue/mail", http.StatusOK)
			contains(t, "/ui/queue/mail", body, `This queue keeps no finished jobs.`, `"keep_finished": 86400`,
				link("mail", "blocked", f.c), link("mail", "parent", f.a))

			body = b.get(t, jobPath("hist", f.a), http.StatusOK)
			contains(t, "A's page", body, `Job `+fmt.Sprint(f.a)+` of queue <a href="/ui/queue/hist">hist</a>`,
				`<span data-mark="status">waiting</span>`, fmt.Sprintf(`<a href="/ui/batch/%d" data-mark="batch">%d</a>`, f.batch, f.batch),
				link("hist", "dependent", f.b)+", "+link("hist", "dependent", f.c),
				`<td data-mark="callbacks">on_success</td>`, `&#34;step&#34;: &#34;a&#34;`)
			body = b.get(t, jobPath("hist", f.b), http.StatusOK)
			contains(t, "B's page", body, `<span data-mark="status">blocked</span>: waits for its parents`,
				`<td>`+link("hist", "parent", f.a)+`</td>`, `<td data-mark="on_parent_failure">fail</td>`, `<td data-mark="callbacks">–</td>`)
			body = b.get(t, jobPath("hist", f.done), http.StatusOK)
			contains(t, "a finished job's page", body, `<span class="succeeded" data-mark="status">succeeded</span>`,
				`<td data-mark="attempts">1</td>`, `<td data-mark="message">&lt;b&gt;done&lt;/b&gt;</td>`,
				`&#34;rows&#34;: [`, `From the queue's history`)
			noRaw(t, "a finished job's page", body)
			body = b.get(t, jobPath("hist", f.failed), http.StatusOK)
			contains(t, "a failed job's page", body, `data-mark="status">failed</span>`, `<td data-mark="message">boom</td>`)

			body = b.get(t, "/ui/batches", http.StatusOK)
			contains(t, "/ui/batches", body, fmt.Sprintf(`<a href="/ui/batch/%d" data-mark="batch">%d</a>`, f.batch, f.batch),
				`aria-label="0 % ended"`, `{&#34;who&#34;:&#34;&lt;i&gt;ada&lt;/i&gt;&#34;}`)
			body = b.get(t, fmt.Sprintf("/ui/batch/%d", f.batch), http.StatusOK)
			contains(t, "the batch's page", body, `<td data-mark="state">3 of 3 jobs pending</td>`,
				`<td data-mark="total">3</td>`, `<td data-mark="succeeded">0</td>`, `<td data-mark="callbacks">on_finish</td>`,
				`&#34;who&#34;: &#34;&lt;i&gt;ada&lt;/i&gt;&#34;`)
			noRaw(t, "the batch's page", body)

			// A succeeds: B and C are released, its callback enqueued, the
			// batch counts it.
			ctx := context.Background()
			if _, err := b.st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "hist", Node: "n1", Limit: 1, Lease: time.Minute}); err != nil {
				t.Fatal(err)
			}
			note := store.FinishNote{ID: f.a, Result: json.RawMessage(`"A's result"`)}
			if _, err := b.st.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: []int64{f.a}, Keep: []store.FinishNote{note}, Flow: []store.FinishNote{note}}); err != nil {
				t.Fatal(err)
			}
			body = b.get(t, jobPath("hist", f.a), http.StatusOK)
			contains(t, "A's page once it succeeded", body, `data-mark="status">succeeded</span>`, `&#34;A&#39;s result&#34;`)
			body = b.get(t, jobPath("hist", f.b), http.StatusOK)
			contains(t, "B's page once A succeeded", body, `<span data-mark="status">waiting</span>`, `<tr><th>waits for</th><td>–</td></tr>`)
			if body = b.get(t, "/ui/queue/mail", http.StatusOK); strings.Contains(body, `data-mark="blocked"`) {
				t.Error("/ui/queue/mail still lists C as blocked once A succeeded")
			}
			body = b.get(t, fmt.Sprintf("/ui/batch/%d", f.batch), http.StatusOK)
			contains(t, "the batch's page once A succeeded", body, `<td data-mark="state">2 of 3 jobs pending</td>`,
				`<td data-mark="succeeded">1</td>`, `<rect class="succeeded" width="66" height="10"/>`, `33 %`)
		})
	}
}

// TestDashboard_LifecycleRefusals: bad and unknown ids and cursors.
func TestDashboard_LifecycleRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite")
	f := addFlows(t, b.st)
	for _, c := range []struct {
		path string
		want int
		says string
	}{
		{"/ui/queue/hist/job/999999", http.StatusNotFound, "job 999999 is neither live in queue hist nor kept in its history"},
		{"/ui/queue/mail/job/999999", http.StatusNotFound, "(the queue keeps no finished jobs: see its keep_finished)"},
		{fmt.Sprintf("/ui/queue/mail/job/%d", f.a), http.StatusNotFound, fmt.Sprintf("job %d is not in queue mail: it is live in another queue", f.a)},
		{"/ui/queue/hist/job/x", http.StatusBadRequest, "id: must be a positive integer, got &#34;x&#34;"},
		{"/ui/queue/hist/job/0", http.StatusBadRequest, "id: must be a positive integer"},
		{"/ui/queue/nope/job/1", http.StatusNotFound, "queue nope does not exist"},
		{"/ui/queue/a%20b/job/1", http.StatusBadRequest, "name: &#34;a b&#34;"},
		{"/ui/batch/999999", http.StatusNotFound, "batch 999999 does not exist"},
		{"/ui/batch/-1", http.StatusBadRequest, "id: must be a positive integer"},
		{"/ui/batches?before=x", http.StatusBadRequest, "before: must be a positive integer, got &#34;x&#34;"},
		{"/ui/queue/hist?status=done", http.StatusBadRequest, "status: must be succeeded, failed or cancelled"},
		{"/ui/queue/hist?before=1", http.StatusBadRequest, "before: not a place in the history"},
		{"/ui/queue/hist?before=999999999999999999.1", http.StatusBadRequest, "before: not a place in the history"},
	} {
		contains(t, c.path, b.get(t, c.path, c.want), c.says)
	}
}

// TestDashboard_HistoryPages: a queue's history shows 100 rows a page,
// the latest first, with an Older link whose page goes on where the first
// stopped; the status links filter it.
func TestDashboard_HistoryPages(t *testing.T) {
	t.Parallel()
	// Paging is the store's FinishedList, tested on every dialect.
	b := setup(t, "sqlite")
	addFlows(t, b.st)
	ctx := context.Background()
	jobs := make([]*store.JobInsertParams, 104)
	for i := range jobs {
		jobs[i] = &store.JobInsertParams{Queue: "hist", Category: "bulk", URL: "http://127.0.0.1:1/"}
	}
	ids, err := b.st.JobsInsert(ctx, jobs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "hist", Node: "n1", Limit: 200, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids { // one by one: each its own finished_at
		if _, err := b.st.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: []int64{id}, Keep: []store.FinishNote{{ID: id}}}); err != nil {
			t.Fatal(err)
		}
	}
	// 106 rows: the failed and the succeeded one of addFlows, then 104.
	body := b.get(t, "/ui/queue/hist", http.StatusOK)
	older := olderRE.FindStringSubmatch(body)
	if older == nil {
		t.Fatal("/ui/queue/hist: 106 finished jobs and no Older link")
	}
	if n := strings.Count(body, `data-mark="finished"`); n != 100 {
		t.Errorf("/ui/queue/hist shows %d finished jobs, want 100", n)
	}
	contains(t, "/ui/queue/hist", body, fmt.Sprintf(`id="finished-%d"`, ids[103]), fmt.Sprintf(`id="finished-%d"`, ids[4]))
	next := strings.ReplaceAll(older[1], "&amp;", "&")
	body = b.get(t, next, http.StatusOK)
	if n := strings.Count(body, `data-mark="finished"`); n != 6 {
		t.Errorf("%s shows %d finished jobs, want 6", next, n)
	}
	contains(t, next, body, fmt.Sprintf(`id="finished-%d"`, ids[3]), fmt.Sprintf(`id="finished-%d"`, ids[0]),
		`<a href="/ui/queue/hist">Latest</a>`, `data-mark="status">failed</td>`)
	if olderRE.MatchString(body) {
		t.Errorf("%s: the last page has an Older link", next)
	}
	body = b.get(t, "/ui/queue/hist?status=failed", http.StatusOK)
	if n := strings.Count(body, `data-mark="finished"`); n != 1 || olderRE.MatchString(body) {
		t.Errorf("/ui/queue/hist?status=failed shows %d finished jobs (older link: %v), want the one failed", n, olderRE.MatchString(body))
	}
	// Turned off: the rows kept before show until pruned, and the page
	// says so.
	if _, err := b.st.QueuePut(ctx, &store.Queue{Name: "hist", PollingInterval: 200, MaxWorkers: 5}); err != nil {
		t.Fatal(err)
	}
	body = b.get(t, "/ui/queue/hist", http.StatusOK)
	contains(t, "/ui/queue/hist without keep_finished", body, "This queue keeps no finished jobs now: these were kept before", `id="older"`)
	if body = b.get(t, "/ui/queue/mail", http.StatusOK); strings.Contains(body, "Show: ") {
		t.Error("/ui/queue/mail, which keeps no history and has none, offers to filter it")
	}
}

var olderRE = regexp.MustCompile(`<a href="([^"]*)" id="older"`)

// TestDashboard_LifecycleConfined: a token confined to some queues sees
// its queues' jobs, and a batch's id without a link: batches span queues,
// and their pages refuse it.
func TestDashboard_LifecycleConfined(t *testing.T) {
	t.Parallel()
	lb := setupLogin(t, "sqlite", false)
	f := addFlows(t, lb.st)
	br := lb.browser(t)
	auth := []string{"Authorization", "Bearer " + lb.tokens["mail-only"]}
	_, body := br.expect("GET", fmt.Sprintf("/ui/queue/mail/job/%d", f.c), nil, http.StatusOK, auth...)
	contains(t, "C's page confined to mai*", body, fmt.Sprintf(`<span data-mark="batch">%d</span>`, f.batch))
	if strings.Contains(body, "/ui/batch/") {
		t.Error("a token confined to mai* gets a link to a batch")
	}
	for _, p := range []string{"/ui/batches", fmt.Sprintf("/ui/batch/%d", f.batch), "/ui/batch/999999"} {
		_, body = br.expect("GET", p, nil, http.StatusForbidden, auth...)
		contains(t, p+" confined to mai*", body, "a batch&#39;s jobs may span queues")
	}
	br.expect("GET", fmt.Sprintf("/ui/queue/hist/job/%d", f.a), nil, http.StatusForbidden, auth...)
	// A's link on C's page, in mail: not found there, and not said to be
	// live elsewhere.
	_, body = br.expect("GET", fmt.Sprintf("/ui/queue/mail/job/%d", f.a), nil, http.StatusNotFound, auth...)
	contains(t, "A's page in mail confined to mai*", body, fmt.Sprintf("job %d is neither live in queue mail nor kept", f.a))
	_, body = br.expect("GET", "/ui/batches", nil, http.StatusOK, "Authorization", "Bearer "+lb.tokens["reader"])
	contains(t, "/ui/batches as a reader", body, fmt.Sprintf(`href="/ui/batch/%d"`, f.batch))
}

// TestDashboard_ManyParents: a fan-in's child links the first of its
// parents and counts the others: 10 on its queue's page, 100 on its own.
func TestDashboard_ManyParents(t *testing.T) {
	t.Parallel()
	b := setup(t, "sqlite")
	p := &store.FlowInsertParams{}
	child := &store.FlowJobParams{Job: &store.JobInsertParams{Queue: "mail", Category: "sum", URL: "http://127.0.0.1:1/"}}
	for i := range 105 {
		p.Jobs = append(p.Jobs, &store.FlowJobParams{Job: &store.JobInsertParams{Queue: "mail", Category: "part", URL: "http://127.0.0.1:1/"}})
		child.DependsOn = append(child.DependsOn, store.FlowParent{Index: i})
	}
	p.Jobs = append(p.Jobs, child)
	fi, err := b.st.JobsInsertFlow(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	id := fi.IDs[105]
	row := regexp.MustCompile(fmt.Sprintf(`(?s)<tr id="blocked-%d">.*?</tr>`, id)).FindString(b.get(t, "/ui/queue/mail", http.StatusOK))
	if n := strings.Count(row, `data-mark="parent"`); n != 10 || !strings.Contains(row, " and 95 more") {
		t.Errorf("the blocked child's row on its queue's page links %d parents, want 10 and 95 more:\n%s", n, row)
	}
	body := b.get(t, fmt.Sprintf("/ui/queue/mail/job/%d", id), http.StatusOK)
	if n := strings.Count(body, `data-mark="parent"`); n != 100 || !strings.Contains(body, " and 5 more") {
		t.Errorf("the child's page links %d parents, want 100 and 5 more", n)
	}
	contains(t, "the child's page", body, fmt.Sprintf(`data-mark="parent">%d</a>, `, fi.IDs[0]))
}
