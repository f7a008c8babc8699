package httpapi_test

import (
	"encoding/json"
	"fmt"
)

// flows enqueues a chain of three jobs as a batch, reads the blocked
// jobs, the jobs' flows and the batch, cancels the chain's head (its
// dependent is cancelled, and the last, which runs whatever its parent
// did, released), and refuses bad flows. The 422s come last: a rolled
// back insert spends ids on some databases and not on others.
func (g *golden) flows() {
	t, req := g.t, g.req
	chain := req("POST", "/jobs", `{"jobs":[`+
		`{"category":"c","url":"http://w/1","run_after":3600,"on_success":{"category":"c","url":"http://w/cb","payload":{"n":1}}},`+
		`{"category":"c","url":"http://w/2","depends_on":[{"index":0}]},`+
		`{"category":"c","url":"http://w/3","run_after":3600,"depends_on":[{"index":1}],"on_parent_failure":"run"}],`+
		`"batch":{"on_finish":{"category":"c","url":"http://w/done"},"meta":{"run":"nightly"}}}`)
	var out struct {
		Jobs    []struct{ ID int64 }
		BatchID int64 `json:"batch_id"`
	}
	if err := json.Unmarshal(chain.body, &out); err != nil || len(out.Jobs) != 3 {
		t.Fatalf("POST /jobs with a chain: %s", chain.body)
	}
	a, b, c := out.Jobs[0].ID, out.Jobs[1].ID, out.Jobs[2].ID
	req("POST", "/job/c", fmt.Sprintf(`{"url":"http://w/4","depends_on":[{"id":%d}],"on_finish":{"category":"c","url":"http://w/cb"}}`, a))
	req("GET", "/queue/q/blocked", "")
	next := req("GET", "/queue/q/blocked?limit=1", "")
	req("GET", "/queue/q/blocked?limit=1&cursor="+nextCursor(t, next.body), "")
	req("GET", "/queue/q/blocked?cursor=nope", "")
	req("GET", "/queue/nope/blocked", "")
	for _, id := range []int64{a, b, c} {
		req("GET", fmt.Sprintf("/queue/q/job/%d", id), "")
	}
	batch := fmt.Sprintf("/batch/%d", out.BatchID)
	req("GET", batch, "")
	req("POST", fmt.Sprintf("/queue/q/job/%d/cancel", a), "")
	req("GET", fmt.Sprintf("/queue/q/job/%d", b), "")
	req("GET", fmt.Sprintf("/queue/q/job/%d", c), "")
	req("GET", "/queue/q/blocked", "")
	req("GET", batch, "")
	req("GET", "/batch/999999", "")
	req("GET", "/batch/x", "")
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1","run_after":3600}],"batch":{}}`)
	req("GET", "/batches", "")
	next = req("GET", "/batches?limit=1", "")
	req("GET", "/batches?limit=1&cursor="+nextCursor(t, next.body), "")
	req("GET", "/batches?cursor=nope", "")

	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1","depends_on":[{"index":0}]}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","depends_on":[{"index":0,"id":1}]}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1","unique_key":"k"}],"batch":{}}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1","on_success":{"category":"c","url":"http://w/1","on_finish":{"category":"c"}}}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"}],"batch":{"meta":"x"}}`)
	req("POST", "/job/c", `{"url":"http://w/1","depends_on":[{"index":0}]}`)
	req("POST", "/job/c", `{"url":"http://w/1","on_failure":{"category":"nowhere","url":"http://w/1"}}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","depends_on":[{"index":0},{"id":999999}]}]}`)
	req("POST", "/job/c", `{"url":"http://w/1","depends_on":[{"id":999999}]}`)
}
