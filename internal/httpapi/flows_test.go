package httpapi_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// noFlows is a store whose JobsInsertFlow fails the test: an enqueue
// without flow fields must not go through it.
type noFlows struct {
	store.Store
	t *testing.T
}

func (s noFlows) JobsInsertFlow(context.Context, *store.FlowInsertParams) (*store.FlowInserted, error) {
	s.t.Error("JobsInsertFlow called for an enqueue without flow fields")
	return nil, store.ErrNotFound
}

// TestPushFlow_PlainJobsKeepTheirPath: an enqueue without callbacks,
// depends_on or a batch (a unique key included) is stored as before,
// never through JobsInsertFlow.
func TestPushFlow_PlainJobsKeepTheirPath(t *testing.T) {
	t.Parallel()
	b := setup(t, noFlows{dbtest.Open(t, "sqlite"), t}, nil)
	b.ok(t, "PUT", "/queue/q", "", nil)
	b.ok(t, "PUT", "/routing/cat", `{"queue_name":"q"}`, nil)
	b.ok(t, "POST", "/job/cat", `{"url":"http://worker.example/","unique_key":"k"}`, nil)
	b.ok(t, "POST", "/job/cat", `{"url":"http://worker.example/","on_success":null,"depends_on":[]}`, nil)
	b.ok(t, "POST", "/jobs", `{"jobs":[{"category":"cat","url":"http://worker.example/"},{"category":"cat","url":"http://worker.example/","unique_key":"k2"}]}`, nil)
	b.ok(t, "POST", "/jobs", `{"jobs":[{"category":"cat","url":"http://worker.example/"}],"batch":null}`, nil)
}

// TestPushFlow_BadRequests: every flow field given wrong answers 4xx
// naming it, before anything is stored.
func TestPushFlow_BadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, noFlows{dbtest.Open(t, "sqlite"), t}, func(o *options) { o.api.MaxBodyBytes = 1 << 20 })
	b.ok(t, "PUT", "/queue/q", "", nil)
	b.ok(t, "PUT", "/routing/cat", `{"queue_name":"q"}`, nil)
	b.ok(t, "PUT", "/queue/pulled", `{"delivery":"pull"}`, nil)
	b.ok(t, "PUT", "/routing/pc", `{"queue_name":"pulled"}`, nil)
	const u = `"url":"http://worker.example/"`
	job := `{"category":"cat",` + u + `}`
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"index not earlier", "/jobs", `{"jobs":[` + job + `,{"category":"cat",` + u + `,"depends_on":[{"index":1}]}]}`, 400,
			"jobs[1].depends_on[0].index: must name an earlier job of this request (0..0), got 1"},
		{"index of the first job", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"depends_on":[{"index":0}]}]}`, 400,
			"jobs[0].depends_on[0].index: must name an earlier job of this request, and this is its first"},
		{"negative index", "/jobs", `{"jobs":[` + job + `,{"category":"cat",` + u + `,"depends_on":[{"index":-1}]}]}`, 400,
			"jobs[1].depends_on[0].index: must name an earlier job of this request (0..0), got -1"},
		{"index and id", "/jobs", `{"jobs":[` + job + `,{"category":"cat",` + u + `,"depends_on":[{"index":0,"id":3}]}]}`, 400,
			"jobs[1].depends_on[0]: give one of index (an earlier job of this request) and id (an existing job)"},
		{"neither index nor id", "/jobs", `{"jobs":[` + job + `,{"category":"cat",` + u + `,"depends_on":[{}]}]}`, 400,
			"jobs[1].depends_on[0]: give one of index (an earlier job of this request) and id (an existing job)"},
		{"id not positive", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"depends_on":[{"id":0}]}]}`, 400,
			"jobs[0].depends_on[0].id: must be a positive integer, got 0"},
		{"parent twice", "/jobs", `{"jobs":[` + job + `,{"category":"cat",` + u + `,"depends_on":[{"index":0},{"index":0}]}]}`, 400,
			"jobs[1].depends_on[1]: names the same job as depends_on[0]"},
		{"parent of another type", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"depends_on":[{"id":"x"}]}]}`, 400,
			`jobs[0].depends_on[0].id: want an integer, got string`},
		{"parent unknown field", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"depends_on":[{"job":1}]}]}`, 400,
			`jobs[0].depends_on[0].job: unknown field`},
		{"parents not a list", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"depends_on":{"id":1}}]}`, 400,
			`jobs[0].depends_on: want an array, got object`},
		{"unique key with depends_on", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"unique_key":"k","depends_on":[{"id":1}]}]}`, 400,
			"jobs[0].unique_key: not with on_success, on_failure, on_finish or depends_on: a job with a flow is always a new job"},
		{"unique key with a callback", "/job/cat", `{` + u + `,"unique_key":"k","on_finish":` + job + `}`, 400,
			"unique_key: not with on_success, on_failure, on_finish or depends_on: a job with a flow is always a new job"},
		{"unique key in a batch", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"unique_key":"k"}],"batch":{}}`, 400,
			"jobs[0].unique_key: not in a batch: a job of a batch is always a new job"},
		{"ordered with depends_on", "/jobs", `{"jobs":[` + job + `,{"category":"cat",` + u + `,"concurrency_key":"k","ordered":true,"depends_on":[{"index":0}]}]}`, 400,
			"jobs[1].ordered: not with depends_on: an ordered key's jobs go in enqueue order, which a blocked job would hold up"},
		{"policy without parents", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"on_parent_failure":"run"}]}`, 400,
			"jobs[0].on_parent_failure: only with depends_on"},
		{"policy with no parents", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"depends_on":[],"on_parent_failure":"run"}]}`, 400,
			"jobs[0].on_parent_failure: only with depends_on"},
		{"unknown policy", "/jobs", `{"jobs":[` + job + `,{"category":"cat",` + u + `,"depends_on":[{"index":0}],"on_parent_failure":"skip"}]}`, 400,
			`jobs[1].on_parent_failure: must be "cancel", "fail" or "run", got "skip"`},
		{"index in a single enqueue", "/job/cat", `{` + u + `,"depends_on":[{"index":0}]}`, 400,
			"depends_on[0].index: only in POST /jobs, for an earlier job of the same request; name an existing job by id"},
		{"callback without url", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"on_success":{"category":"cat"}}]}`, 400,
			`jobs[0].on_success.url: required: queue "q" delivers by push (only the jobs of a pull queue may leave it out)`},
		{"callback without category", "/job/cat", `{` + u + `,"on_failure":{` + u + `}}`, 400,
			"on_failure.category: must not be empty"},
		{"callback bad field", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"on_finish":{"category":"cat",` + u + `,"max_retries":-1}}]}`, 400,
			"jobs[0].on_finish.max_retries: must be 0..1000000, got -1"},
		{"callback unknown field", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"on_finish":{"category":"cat",` + u + `,"retries":1}}]}`, 400,
			"jobs[0].on_finish.retries: unknown field"},
		{"callback not an object", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"on_success":"cb"}]}`, 400,
			"jobs[0].on_success: want a JSON object, got string"},
		{"callback of a callback", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"on_success":{"category":"cat",` + u + `,"on_failure":` + job + `}}]}`, 400,
			"jobs[0].on_success.on_failure: not in a callback: a callback has no callbacks of its own"},
		{"callback with parents", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"on_success":{"category":"cat",` + u + `,"depends_on":[{"id":1}]}}]}`, 400,
			"jobs[0].on_success.depends_on: not in a callback: a callback is due when its job ends"},
		{"callback with a unique key", "/job/cat", `{` + u + `,"on_success":{"category":"cat",` + u + `,"unique_key":"k"}}`, 400,
			"on_success.unique_key: not in a callback: a callback is always a new job"},
		{"callback unrouted", "/jobs", `{"jobs":[{"category":"cat",` + u + `,"on_success":{"category":"nowhere",` + u + `}}]}`, 404,
			"jobs[0].on_success.category: no routing for \"nowhere\" and no default queue; PUT /routing/nowhere first"},
		{"batch meta not an object", "/jobs", `{"jobs":[` + job + `],"batch":{"meta":[1]}}`, 400,
			"batch.meta: want a JSON object, got [1]"},
		{"batch unknown field", "/jobs", `{"jobs":[` + job + `],"batch":{"on_error":` + job + `}}`, 400,
			"batch.on_error: unknown field"},
		{"batch not an object", "/jobs", `{"jobs":[` + job + `],"batch":true}`, 400,
			"batch: want a JSON object, got bool"},
		{"batch callback without url", "/jobs", `{"jobs":[` + job + `],"batch":{"on_finish":{"category":"cat"}}}`, 400,
			`batch.on_finish.url: required: queue "q" delivers by push (only the jobs of a pull queue may leave it out)`},
		{"batch callback with a callback", "/jobs", `{"jobs":[` + job + `],"batch":{"on_success":{"category":"pc","on_finish":` + job + `}}}`, 400,
			"batch.on_success.on_finish: not in a callback: a callback has no callbacks of its own"},
		{"too many parents", "/job/cat", `{` + u + `,"depends_on":[` + strings.Repeat(`{"id":1},`, 10000) + `{"id":2}]}`, 400,
			"depends_on: at most 10000 parents, got 10001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.do(t, "POST", tc.path, tc.body)
			var got struct{ Error string }
			if err := json.Unmarshal(res.body, &got); err != nil {
				t.Fatalf("%d %s: %v", res.status, res.body, err)
			}
			if res.status != tc.status || got.Error != tc.want {
				t.Errorf("POST %s = %d %q\nwant %d %q", tc.path, res.status, got.Error, tc.status, tc.want)
			}
		})
	}
}

// TestPushFlow_BatchTakesUpTo10000Jobs: POST /jobs takes 1,000 jobs, and
// 10,000 with a batch, all of which come in its one request.
func TestPushFlow_BatchTakesUpTo10000Jobs(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), func(o *options) { o.api.MaxBodyBytes = 8 << 20 })
	b.ok(t, "PUT", "/queue/q", `{"max_workers":1}`, nil)
	b.ok(t, "POST", "/queue/q/pause", "", nil)
	b.ok(t, "PUT", "/routing/cat", `{"queue_name":"q"}`, nil)
	jobs := func(n int) string {
		return `[` + strings.TrimSuffix(strings.Repeat(`{"category":"cat","url":"http://worker.example/"},`, n), ",") + `]`
	}
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"1001 without a batch", `{"jobs":` + jobs(1001) + `}`, 400, "jobs: must hold 1..1000 jobs, got 1001"},
		{"10001 in a batch", `{"jobs":` + jobs(10001) + `,"batch":{}}`, 400, "jobs: must hold 1..10000 jobs with a batch, got 10001"},
		{"10000 in a batch", `{"jobs":` + jobs(10000) + `,"batch":{}}`, 200, `"batch_id":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.do(t, "POST", "/jobs", tc.body)
			if res.status != tc.status || !strings.Contains(string(res.body), tc.want) {
				t.Fatalf("status %d, body %.200s; want %d with %q", res.status, res.body, tc.status, tc.want)
			}
		})
	}
	var batch struct{ Total int }
	b.ok(t, "GET", "/batches", "", nil)
	b.ok(t, "GET", "/batch/1", "", &batch)
	if batch.Total != 10000 {
		t.Fatalf("batch total %d, want 10000", batch.Total)
	}
}
