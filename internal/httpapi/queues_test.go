package httpapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// queueAnswer is the Fireworq queue object as a client decodes it.
type queueAnswer struct {
	Name                   string   `json:"name"`
	PollingInterval        int      `json:"polling_interval"`
	MaxWorkers             int      `json:"max_workers"`
	MaxDispatchesPerSecond *float64 `json:"max_dispatches_per_second"`
	MaxBurstSize           *int     `json:"max_burst_size"`
}

type routingAnswer struct {
	JobCategory string `json:"job_category"`
	QueueName   string `json:"queue_name"`
}

func checkQueue(t *testing.T, got *queueAnswer, name string, polling, workers int, dps *float64, burst *int) {
	t.Helper()
	if got.Name != name || got.PollingInterval != polling || got.MaxWorkers != workers {
		t.Errorf("queue = {%q %d %d}, want {%q %d %d}", got.Name, got.PollingInterval, got.MaxWorkers, name, polling, workers)
	}
	if (got.MaxDispatchesPerSecond == nil) != (dps == nil) || (dps != nil && *got.MaxDispatchesPerSecond != *dps) {
		t.Errorf("max_dispatches_per_second = %v, want %v", deref(got.MaxDispatchesPerSecond), deref(dps))
	}
	if (got.MaxBurstSize == nil) != (burst == nil) || (burst != nil && *got.MaxBurstSize != *burst) {
		t.Errorf("max_burst_size = %v, want %v", deref(got.MaxBurstSize), deref(burst))
	}
}

// deref shows a pointer's value, or "absent".
func deref[T any](p *T) any {
	if p == nil {
		return "absent"
	}
	return *p
}

func ptr[T any](v T) *T { return &v }

func TestQueues_CRUD(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)

		// An empty list is an empty array, not null.
		if got, want := strings.TrimSpace(string(b.do(t, "GET", "/queues", "").body)), "[]"; got != want {
			t.Errorf("GET /queues on no queues = %s, want %s", got, want)
		}

		var q queueAnswer
		// No body at all, an empty object, some fields: absent fields
		// take the configured defaults.
		b.ok(t, "PUT", "/queue/nobody", "", &q)
		checkQueue(t, &q, "nobody", 200, 20, nil, nil)
		q = queueAnswer{}
		b.ok(t, "PUT", "/queue/empty", "{}", &q)
		checkQueue(t, &q, "empty", 200, 20, nil, nil)
		q = queueAnswer{}
		b.ok(t, "PUT", "/queue/some", `{"max_workers":5}`, &q)
		checkQueue(t, &q, "some", 200, 5, nil, nil)

		// Throttle fields round-trip; limits are accepted.
		full := `{"polling_interval":3600000,"max_workers":10000,"max_dispatches_per_second":2.5,"max_burst_size":7}`
		q = queueAnswer{}
		b.ok(t, "PUT", "/queue/full", full, &q)
		checkQueue(t, &q, "full", 3600000, 10000, ptr(2.5), ptr(7))
		q = queueAnswer{}
		b.ok(t, "GET", "/queue/full", "", &q)
		checkQueue(t, &q, "full", 3600000, 10000, ptr(2.5), ptr(7))

		// Throttle fields are absent, not null, when unset.
		res := b.do(t, "GET", "/queue/some", "")
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(res.body, &raw); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"max_dispatches_per_second", "max_burst_size"} {
			if v, ok := raw[f]; ok {
				t.Errorf("GET /queue/some has %s = %s, want it absent", f, v)
			}
		}

		// PUT replaces: fields left out go back to the defaults.
		q = queueAnswer{}
		b.ok(t, "PUT", "/queue/full", `{"polling_interval":50}`, &q)
		checkQueue(t, &q, "full", 50, 20, nil, nil)
		q = queueAnswer{}
		b.ok(t, "GET", "/queue/full", "", &q)
		checkQueue(t, &q, "full", 50, 20, nil, nil)

		// GET /queues is sorted by name.
		for _, name := range []string{"gamma", "alpha2", "beta", "alpha"} {
			b.ok(t, "PUT", "/queue/"+name, "", nil)
		}
		var list []queueAnswer
		b.ok(t, "GET", "/queues", "", &list)
		var names []string
		for _, q := range list {
			names = append(names, q.Name)
		}
		want := []string{"alpha", "alpha2", "beta", "empty", "full", "gamma", "nobody", "some"}
		if !slices.Equal(names, want) {
			t.Errorf("GET /queues names = %v, want %v", names, want)
		}
		if i := slices.Index(names, "some"); i >= 0 {
			checkQueue(t, &list[i], "some", 200, 5, nil, nil)
		}

		// DELETE answers the deleted queue; then it is gone.
		b.ok(t, "PUT", "/queue/full", `{"max_dispatches_per_second":0.5,"max_burst_size":1}`, nil)
		q = queueAnswer{}
		b.ok(t, "DELETE", "/queue/full", "", &q)
		checkQueue(t, &q, "full", 200, 20, ptr(0.5), ptr(1))
		for _, method := range []string{"GET", "DELETE"} {
			msg := errorMessage(t, b.do(t, method, "/queue/full", ""), http.StatusNotFound)
			if !strings.Contains(msg, "full") {
				t.Errorf("%s of a deleted queue: error %q does not name it", method, msg)
			}
		}
	})
}

func TestQueueNode_Leader(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		b.ok(t, "PUT", "/queue/q", "", nil)

		msg := errorMessage(t, b.do(t, "GET", "/queue/q/node", ""), http.StatusNotFound)
		if !strings.Contains(msg, `"q"`) {
			t.Errorf("error %q does not name the queue", msg)
		}

		ctx := t.Context()
		if err := b.st.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "node-1", Host: "10.0.0.1:8080", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := b.st.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "node-1"}); err != nil {
			t.Fatal(err)
		}
		var node map[string]string
		b.ok(t, "GET", "/queue/q/node", "", &node)
		if got, want := node["id"], "node-1"; got != want {
			t.Errorf("node id = %q, want %q", got, want)
		}
		if got, want := node["host"], "10.0.0.1:8080"; got != want {
			t.Errorf("node host = %q, want %q", got, want)
		}
	})
}

func TestRoutings_CRUD(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		b.ok(t, "PUT", "/queue/q1", "", nil)
		b.ok(t, "PUT", "/queue/q2", "", nil)

		if got, want := strings.TrimSpace(string(b.do(t, "GET", "/routings", "").body)), "[]"; got != want {
			t.Errorf("GET /routings on no routings = %s, want %s", got, want)
		}

		var rt routingAnswer
		b.ok(t, "PUT", "/routing/cat.b", `{"queue_name":"q1"}`, &rt)
		if got, want := rt, (routingAnswer{"cat.b", "q1"}); got != want {
			t.Errorf("PUT /routing/cat.b = %+v, want %+v", got, want)
		}
		b.ok(t, "PUT", "/routing/cat.a", `{"queue_name":"q1"}`, nil)
		// PUT replaces.
		b.ok(t, "PUT", "/routing/cat.a", `{"queue_name":"q2"}`, &rt)
		if got, want := rt, (routingAnswer{"cat.a", "q2"}); got != want {
			t.Errorf("PUT /routing/cat.a again = %+v, want %+v", got, want)
		}
		rt = routingAnswer{}
		b.ok(t, "GET", "/routing/cat.a", "", &rt)
		if got, want := rt, (routingAnswer{"cat.a", "q2"}); got != want {
			t.Errorf("GET /routing/cat.a = %+v, want %+v", got, want)
		}

		var list []routingAnswer
		b.ok(t, "GET", "/routings", "", &list)
		if want := []routingAnswer{{"cat.a", "q2"}, {"cat.b", "q1"}}; !slices.Equal(list, want) {
			t.Errorf("GET /routings = %+v, want %+v", list, want)
		}

		// Deleting a queue keeps its routings.
		b.ok(t, "DELETE", "/queue/q1", "", nil)
		rt = routingAnswer{}
		b.ok(t, "GET", "/routing/cat.b", "", &rt)
		if got, want := rt, (routingAnswer{"cat.b", "q1"}); got != want {
			t.Errorf("GET /routing/cat.b after its queue was deleted = %+v, want %+v", got, want)
		}

		rt = routingAnswer{}
		b.ok(t, "DELETE", "/routing/cat.a", "", &rt)
		if got, want := rt, (routingAnswer{"cat.a", "q2"}); got != want {
			t.Errorf("DELETE /routing/cat.a = %+v, want %+v", got, want)
		}
		for _, method := range []string{"GET", "DELETE"} {
			msg := errorMessage(t, b.do(t, method, "/routing/cat.a", ""), http.StatusNotFound)
			if !strings.Contains(msg, "cat.a") {
				t.Errorf("%s of a deleted routing: error %q does not name it", method, msg)
			}
		}
		msg := errorMessage(t, b.do(t, "PUT", "/routing/cat.c", `{"queue_name":"q1"}`), http.StatusNotFound)
		if !strings.Contains(msg, "queue_name") {
			t.Errorf("routing to a deleted queue: error %q does not name queue_name", msg)
		}
	})
}

func TestQueues_PauseResume(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		var q struct {
			Name       string `json:"name"`
			MaxWorkers int    `json:"max_workers"`
			Paused     *bool  `json:"paused"`
		}
		paused := func(want bool) {
			t.Helper()
			if q.Paused == nil || *q.Paused != want {
				t.Fatalf("queue %+v, want paused %v", q, want)
			}
		}
		b.ok(t, "PUT", "/queue/q", `{"max_workers":3}`, &q)
		paused(false)
		b.ok(t, "POST", "/queue/q/pause", "", &q)
		paused(true)
		b.ok(t, "GET", "/queue/q", "", &q)
		paused(true)
		// PUT without "paused" keeps the pause.
		b.ok(t, "PUT", "/queue/q", `{"max_workers":4}`, &q)
		paused(true)
		if q.MaxWorkers != 4 {
			t.Fatalf("PUT did not apply max_workers: %+v", q)
		}
		var list []map[string]any
		b.ok(t, "GET", "/queues", "", &list)
		if len(list) != 1 || list[0]["paused"] != true {
			t.Fatalf("GET /queues = %v, want q paused", list)
		}
		b.ok(t, "POST", "/queue/q/resume", "{}", &q)
		paused(false)
		b.ok(t, "PUT", "/queue/q", `{"paused":true}`, &q)
		paused(true)
		b.ok(t, "PUT", "/queue/q", `{"paused":false}`, &q)
		paused(false)
		// Pausing twice is fine.
		b.ok(t, "POST", "/queue/q/pause", "", &q)
		b.ok(t, "POST", "/queue/q/pause", "", &q)
		paused(true)
	})
}
