package client_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// TestFlows_Requests: PushBatch, Batch, Batches and Blocked send the
// requests the API documents, and read its answers.
func TestFlows_Requests(t *testing.T) {
	t.Parallel()
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+strings.TrimSpace(string(body)))
		switch r.URL.Path {
		case "/jobs":
			io.WriteString(w, `{"jobs":[{"id":7,"blocked":true}],"batch_id":3}`)
		case "/batch/3":
			io.WriteString(w, `{"id":3,"total":1,"pending":1,"succeeded":0,"failed":0,"cancelled":0,"created_at":"2026-12-05T00:00:00Z","meta":{"a":1}}`)
		case "/batches":
			io.WriteString(w, `{"batches":[{"id":3}],"next_cursor":"c2"}`)
		default:
			io.WriteString(w, `{"jobs":[{"id":7,"status":"blocked","flow":{"waits_for":[5]}}]}`)
		}
	}))
	t.Cleanup(srv.Close)
	c := client.New(srv.URL, nil)
	ctx := t.Context()
	res, err := c.PushBatch(ctx, &rowqtype.BatchRequest{Meta: json.RawMessage(`{"a":1}`)}, []*rowqtype.BatchJob{
		{Category: "c", JobRequest: rowqtype.JobRequest{URL: "http://w/", DependsOn: []rowqtype.JobRef{{ID: new(int64(5))}}, OnParentFailure: new(rowqtype.OnParentRun)}},
	})
	if err != nil || res.BatchID != 3 || !res.Jobs[0].Blocked {
		t.Fatalf("PushBatch = %+v, %v", res, err)
	}
	b, err := c.Batch(ctx, 3)
	if err != nil || b.Pending != 1 || string(b.Meta) != `{"a":1}` || b.FinishedAt != nil {
		t.Fatalf("Batch = %+v, %v", b, err)
	}
	page, err := c.Batches(ctx, &client.ListOptions{Limit: 2, Cursor: "c1", Order: "asc"})
	if err != nil || page.NextCursor != "c2" || page.Batches[0].ID != 3 {
		t.Fatalf("Batches = %+v, %v", page, err)
	}
	jobs, err := c.Blocked(ctx, "q", &client.ListOptions{Limit: 5})
	if err != nil || jobs.Jobs[0].Status != rowqtype.JobStatusBlocked || jobs.Jobs[0].Flow.WaitsFor[0] != 5 {
		t.Fatalf("Blocked = %+v, %v", jobs, err)
	}
	want := []string{
		`POST /jobs {"jobs":[{"category":"c","url":"http://w/","depends_on":[{"id":5}],"on_parent_failure":"run"}],"batch":{"meta":{"a":1}}}`,
		"GET /batch/3 ",
		"GET /batches?cursor=c1&limit=2 ",
		"GET /queue/q/blocked?limit=5 ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
