package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// badInput is a request the API must refuse with status and an error
// message containing field.
type badInput struct {
	name, method, path, body string
	status                   int
	field                    string
}

func runBadInputs(t *testing.T, b *bundle, tests []badInput) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			msg := errorMessage(t, b.do(t, tc.method, tc.path, tc.body), tc.status)
			if !strings.Contains(msg, tc.field) {
				t.Errorf("error %q does not name %q", msg, tc.field)
			}
		})
	}
}

// The validation tests run on SQLite only: every request here is refused
// before the handler reaches the database (except the 404s, which read
// only), so the dialect makes no difference.

func TestPushJob_BadInput(t *testing.T) {
	t.Parallel()
	// A default queue, so that a valid request would be accepted: every
	// refusal below is for the input, not for routing.
	b := setup(t, dbtest.Open(t, "sqlite"), func(o *options) { o.enq.DefaultQueue = "default" })

	const u = `"url":"http://worker.example/run"`
	job := func(fields string) string { return "{" + u + "," + fields + "}" }
	long128 := strings.Repeat("c", 128)
	tests := []badInput{
		{name: "MissingURL", body: `{"payload":{}}`, field: "url"},
		{name: "EmptyURL", body: `{"url":""}`, field: "url"},
		{name: "URLFTP", body: `{"url":"ftp://worker.example/run"}`, field: "url"},
		{name: "URLNoScheme", body: `{"url":"worker.example/run"}`, field: "url"},
		{name: "URLRelative", body: `{"url":"/run"}`, field: "url"},
		{name: "URLNoHost", body: `{"url":"http:///run"}`, field: "url"},
		{name: "URLUnparsable", body: `{"url":"http://[::1"}`, field: "url"},
		{name: "URLTooLong", body: `{"url":"http://worker.example/` + strings.Repeat("x", 2048) + `"}`, field: "url"},
		{name: "URLNumber", body: `{"url":5}`, field: "url"},

		{name: "PayloadNotUTF8", body: job(`"payload":"caf` + "\xe9" + `"`), field: "payload"},
		{name: "RunAfterNegative", body: job(`"run_after":-1`), field: "run_after"},
		{name: "RunAfterTooLarge", body: job(`"run_after":100000000`), field: "run_after"},
		{name: "RunAfterFraction", body: job(`"run_after":1.5`), field: "run_after"},
		{name: "RunAfterString", body: job(`"run_after":"10"`), field: "run_after"},
		{name: "RunAfterOverflow", body: job(`"run_after":1e30`), field: "run_after"},
		{name: "MaxRetriesNegative", body: job(`"max_retries":-1`), field: "max_retries"},
		{name: "MaxRetriesTooLarge", body: job(`"max_retries":1000001`), field: "max_retries"},
		{name: "MaxRetriesFraction", body: job(`"max_retries":1.5`), field: "max_retries"},
		{name: "MaxRetriesString", body: job(`"max_retries":"3"`), field: "max_retries"},
		{name: "RetryDelayNegative", body: job(`"retry_delay":-1`), field: "retry_delay"},
		{name: "RetryDelayTooLarge", body: job(`"retry_delay":2592001`), field: "retry_delay"},
		{name: "RetryDelayFraction", body: job(`"retry_delay":0.5`), field: "retry_delay"},
		{name: "RetryDelayString", body: job(`"retry_delay":"5"`), field: "retry_delay"},
		{name: "RetryDelayBool", body: job(`"retry_delay":true`), field: "retry_delay"},
		{name: "TimeoutNegative", body: job(`"timeout":-1`), field: "timeout"},
		{name: "TimeoutTooLarge", body: job(`"timeout":86401`), field: "timeout"},
		{name: "TimeoutFraction", body: job(`"timeout":1.5`), field: "timeout"},
		{name: "TimeoutString", body: job(`"timeout":"30"`), field: "timeout"},

		{name: "TraceParentInvalid", body: job(`"traceparent":"00-xyz"`), field: "traceparent"},
		{name: "TraceParentEmpty", body: job(`"traceparent":""`), field: "traceparent"},
		{name: "TraceParentUppercase", body: job(`"traceparent":"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"`), field: "traceparent"},
		{name: "TraceParentZeroTraceID", body: job(`"traceparent":"00-00000000000000000000000000000000-00f067aa0ba902b7-01"`), field: "traceparent"},
		{name: "TraceParentNumber", body: job(`"traceparent":5`), field: "traceparent"},
		{name: "TraceStateWithoutParent", body: job(`"tracestate":"rojo=1"`), field: "tracestate"},
		{name: "TraceStateInvalid", body: job(`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"Rojo=1"`), field: "tracestate"},
		{name: "TraceStateTooLong", body: job(`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=` +
			strings.Repeat("v", 255) + `,b=` + strings.Repeat("v", 253) + `"`), field: "tracestate"},

		{name: "UnknownField", body: job(`"prio":1`), field: "prio"},
		{name: "InvalidJSON", body: `{"url":`, field: "body"},
		{name: "SyntaxError", body: `{"url" "x"}`, field: "body"},
		{name: "EmptyBody", body: ``, field: "body"},
		{name: "Array", body: `[` + job("") + `]`, field: "body"},
		{name: "String", body: `"http://worker.example/run"`, field: "body"},
		{name: "TrailingObject", body: job(`"timeout":1`) + `{}`, field: "body"},
		{name: "TrailingGarbage", body: job(`"timeout":1`) + ` x`, field: "body"},
		{name: "TrailingBrace", body: job(`"timeout":1`) + `}`, field: "body"},
		{name: "TrailingBracket", body: job(`"timeout":1`) + `]`, field: "body"},

		{name: "CategoryBadChars", path: "/job/a%20b", body: job(""), field: "category"},
		{name: "CategorySlash", path: "/job/a%2Fb", body: job(""), field: "category"},
		{name: "CategoryNonASCII", path: "/job/caf%C3%A9", body: job(""), field: "category"},
		{name: "CategoryTooLong", path: "/job/" + long128 + "c", body: job(""), field: "category"},
	}
	for i := range tests {
		tests[i].method = "POST"
		if tests[i].path == "" {
			tests[i].path = "/job/cat"
		}
		tests[i].status = http.StatusBadRequest
	}
	runBadInputs(t, b, tests)

	// The limits themselves are accepted: 128 characters of category, the
	// largest values of every field, a URL of 2048 characters.
	t.Run("Limits", func(t *testing.T) {
		t.Parallel()
		body := `{"url":"http://worker.example/` + strings.Repeat("x", 2048-len("http://worker.example/")) +
			`","run_after":31622400,"max_retries":1000000,"retry_delay":2592000,"timeout":86400}`
		b.ok(t, "POST", "/job/"+long128, body, nil)
	})
}

func TestPushJob_Unrouted(t *testing.T) {
	t.Parallel()
	// No default queue: an unrouted category is refused before any write.
	b := setup(t, dbtest.Open(t, "sqlite"), nil)
	msg := errorMessage(t, b.do(t, "POST", "/job/lonely", `{"url":"http://worker.example/run"}`), http.StatusNotFound)
	for _, want := range []string{"category", "lonely"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not name %q", msg, want)
		}
	}
}

func TestPutQueue_BadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), nil)
	tests := []badInput{
		{name: "PollingIntervalZero", body: `{"polling_interval":0}`, field: "polling_interval"},
		{name: "PollingIntervalNegative", body: `{"polling_interval":-5}`, field: "polling_interval"},
		{name: "PollingIntervalTooLarge", body: `{"polling_interval":3600001}`, field: "polling_interval"},
		{name: "PollingIntervalFraction", body: `{"polling_interval":1.5}`, field: "polling_interval"},
		{name: "PollingIntervalString", body: `{"polling_interval":"200"}`, field: "polling_interval"},
		{name: "MaxWorkersZero", body: `{"max_workers":0}`, field: "max_workers"},
		{name: "MaxWorkersTooLarge", body: `{"max_workers":10001}`, field: "max_workers"},
		{name: "MaxWorkersString", body: `{"max_workers":"20"}`, field: "max_workers"},
		{name: "MaxDispatchesZero", body: `{"max_dispatches_per_second":0}`, field: "max_dispatches_per_second"},
		{name: "MaxDispatchesNegative", body: `{"max_dispatches_per_second":-1.5}`, field: "max_dispatches_per_second"},
		{name: "MaxDispatchesTooLarge", body: `{"max_dispatches_per_second":1e10}`, field: "max_dispatches_per_second"},
		{name: "MaxDispatchesString", body: `{"max_dispatches_per_second":"10"}`, field: "max_dispatches_per_second"},
		{name: "MaxBurstSizeZero", body: `{"max_burst_size":0}`, field: "max_burst_size"},
		{name: "MaxBurstSizeNegative", body: `{"max_burst_size":-1}`, field: "max_burst_size"},
		{name: "MaxBurstSizeTooLarge", body: `{"max_burst_size":2147483648}`, field: "max_burst_size"},
		{name: "MaxBurstSizeFraction", body: `{"max_burst_size":2.5}`, field: "max_burst_size"},
		{name: "UnknownField", body: `{"max_worker":5}`, field: "max_worker"},
		{name: "InvalidJSON", body: `{"max_workers":`, field: "body"},
		{name: "Array", body: `[]`, field: "body"},
		{name: "TrailingData", body: `{"max_workers":5}{}`, field: "body"},
		{name: "NameBadChars", path: "/queue/a%20b", body: `{}`, field: "name"},
		{name: "NameTooLong", path: "/queue/" + strings.Repeat("q", 129), body: `{}`, field: "name"},
	}
	for i := range tests {
		tests[i].method = "PUT"
		if tests[i].path == "" {
			tests[i].path = "/queue/q"
		}
		tests[i].status = http.StatusBadRequest
	}
	tests = append(tests,
		badInput{name: "GetBadName", method: "GET", path: "/queue/a%20b", status: 400, field: "name"},
		badInput{name: "DeleteBadName", method: "DELETE", path: "/queue/a%20b", status: 400, field: "name"},
		badInput{name: "NodeBadName", method: "GET", path: "/queue/a%20b/node", status: 400, field: "name"},
		badInput{name: "GetMissing", method: "GET", path: "/queue/missing", status: 404, field: "missing"},
		badInput{name: "DeleteMissing", method: "DELETE", path: "/queue/missing", status: 404, field: "missing"},
		badInput{name: "NodeOfMissingQueue", method: "GET", path: "/queue/missing/node", status: 404, field: "missing"},
	)
	// The group returns once its parallel cases are done.
	t.Run("Cases", func(t *testing.T) { runBadInputs(t, b, tests) })

	t.Run("NothingStored", func(t *testing.T) {
		qs, err := b.st.QueueList(t.Context(), &store.QueueListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(qs), 0; got != want {
			t.Errorf("%d queues stored after refused PUTs, want %d", got, want)
		}
	})
}

func TestPutRouting_BadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), nil)
	b.ok(t, "PUT", "/queue/q", "", nil)
	tests := []badInput{
		{name: "MissingQueueName", body: `{}`, status: 400, field: "queue_name"},
		{name: "EmptyQueueName", body: `{"queue_name":""}`, status: 400, field: "queue_name"},
		{name: "QueueNameNumber", body: `{"queue_name":5}`, status: 400, field: "queue_name"},
		{name: "QueueNameBadChars", body: `{"queue_name":"a b"}`, status: 400, field: "queue_name"},
		{name: "QueueNameTooLong", body: `{"queue_name":"` + strings.Repeat("q", 129) + `"}`, status: 400, field: "queue_name"},
		{name: "QueueMissing", body: `{"queue_name":"nosuch"}`, status: 404, field: "queue_name"},
		{name: "UnknownField", body: `{"queue_name":"q","queue":"q"}`, status: 400, field: "queue"},
		{name: "EmptyBody", body: ``, status: 400, field: "body"},
		{name: "InvalidJSON", body: `{"queue_name"`, status: 400, field: "body"},
		{name: "CategoryBadChars", path: "/routing/a%20b", body: `{"queue_name":"q"}`, status: 400, field: "category"},
		{name: "CategoryTooLong", path: "/routing/" + strings.Repeat("c", 129), body: `{"queue_name":"q"}`, status: 400, field: "category"},
	}
	for i := range tests {
		tests[i].method = "PUT"
		if tests[i].path == "" {
			tests[i].path = "/routing/cat"
		}
	}
	tests = append(tests,
		badInput{name: "GetBadCategory", method: "GET", path: "/routing/a%20b", status: 400, field: "category"},
		badInput{name: "DeleteBadCategory", method: "DELETE", path: "/routing/a%20b", status: 400, field: "category"},
		badInput{name: "GetMissing", method: "GET", path: "/routing/nosuch", status: 404, field: "nosuch"},
		badInput{name: "DeleteMissing", method: "DELETE", path: "/routing/nosuch", status: 404, field: "nosuch"},
	)
	runBadInputs(t, b, tests)
}

func TestJobOptions_BadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), func(o *options) { o.enq.DefaultQueue = "default" })
	b.ok(t, "PUT", "/queue/q", "", nil)

	const u = `"url":"http://worker.example/run"`
	job := func(fields string) string { return "{" + u + "," + fields + "}" }
	jobs := func(elems ...string) string { return `{"jobs":[` + strings.Join(elems, ",") + `]}` }
	many := make([]string, 1001)
	for i := range many {
		many[i] = `{"category":"c",` + u + `}`
	}
	tests := []badInput{
		{name: "PriorityTooHigh", body: job(`"priority":1001`), field: "priority"},
		{name: "PriorityTooLow", body: job(`"priority":-1001`), field: "priority"},
		{name: "PriorityFraction", body: job(`"priority":1.5`), field: "priority"},
		{name: "PriorityString", body: job(`"priority":"high"`), field: "priority"},
		{name: "UniqueKeyEmpty", body: job(`"unique_key":""`), field: "unique_key"},
		{name: "UniqueKeyNumber", body: job(`"unique_key":5`), field: "unique_key"},
		{name: "UniqueKeyTooLong", body: job(`"unique_key":"` + strings.Repeat("é", 256) + `"`), field: "unique_key"},
		{name: "UniqueKeyTrailingSpace", body: job(`"unique_key":"a "`), field: "unique_key"},
		{name: "UniqueKeyControl", body: job(`"unique_key":"a\u0000b"`), field: "unique_key"},
		{name: "BackoffUnknown", body: job(`"retry_backoff":"linear","retry_delay":1`), field: "retry_backoff"},
		{name: "DelayMaxWithFixed", body: job(`"retry_delay":1,"retry_delay_max":10`), field: "retry_delay_max"},
		{name: "ExponentialWithoutBase", body: job(`"retry_backoff":"exponential"`), field: "retry_delay"},
		{name: "DelayMaxBelowBase", body: job(`"retry_backoff":"exponential","retry_delay":10,"retry_delay_max":5`), field: "retry_delay_max"},
		{name: "DelayMaxTooLarge", body: job(`"retry_backoff":"exponential","retry_delay":10,"retry_delay_max":2592001`), field: "retry_delay_max"},
		{name: "JitterAboveOne", body: job(`"retry_jitter":1.5`), field: "retry_jitter"},
		{name: "JitterNegative", body: job(`"retry_jitter":-0.1`), field: "retry_jitter"},
		{name: "JitterString", body: job(`"retry_jitter":"0.1"`), field: "retry_jitter"},

		{name: "JobsMissing", path: "/jobs", body: `{}`, field: "jobs"},
		{name: "JobsEmpty", path: "/jobs", body: jobs(), field: "jobs"},
		{name: "JobsTooMany", path: "/jobs", body: jobs(many...), field: "jobs"},
		{name: "JobsNotArray", path: "/jobs", body: `{"jobs":{}}`, field: "jobs"},
		{name: "JobsElementNoURL", path: "/jobs", body: jobs(`{"category":"c",`+u+`}`, `{"category":"c"}`), field: "jobs[1].url"},
		{name: "JobsElementNoCategory", path: "/jobs", body: jobs(`{` + u + `}`), field: "jobs[0].category"},
		{name: "JobsElementBadCategory", path: "/jobs", body: jobs(`{"category":"a b",` + u + `}`), field: "jobs[0].category"},
		{name: "JobsElementUnknownField", path: "/jobs", body: jobs(`{"category":"c",` + u + `,"colour":1}`), field: "jobs[0].colour"},
		{name: "JobsElementWrongType", path: "/jobs", body: jobs(`{"category":"c",` + u + `,"max_retries":"3"}`), field: "jobs[0].max_retries"},
		{name: "JobsElementNotObject", path: "/jobs", body: jobs(`5`), field: "jobs[0]"},
		{name: "JobsElementBadTraceParent", path: "/jobs", body: jobs(`{"category":"c",`+u+`}`, `{"category":"c",`+u+`,"traceparent":"00-1-2-01"}`), field: "jobs[1].traceparent"},
		{name: "JobsElementNull", path: "/jobs", body: jobs(`null`), field: "jobs[0]"},
		{name: "JobsElementBadPriority", path: "/jobs", body: jobs(`{"category":"c",`+u+`}`, `{"category":"c",`+u+`}`, `{"category":"c",`+u+`,"priority":5000}`), field: "jobs[2].priority"},
		{name: "JobsUnknownField", path: "/jobs", body: `{"jobs":[],"x":1}`, field: "x"},

		{name: "PauseUnknownField", path: "/queue/q/pause", body: `{"now":true}`, field: "now"},
		{name: "PauseBadName", path: "/queue/a%20b/pause", field: "name"},
		{name: "ResumeBadName", path: "/queue/a%20b/resume", field: "name"},
		{name: "RetryBadID", path: "/queue/q/failed/abc/retry", field: "id"},
		{name: "RetryZeroID", path: "/queue/q/failed/0/retry", field: "id"},
		{name: "RetryBadQueue", path: "/queue/a%20b/failed/1/retry", field: "name"},
		{name: "BulkRetryNegativeID", path: "/queue/q/failed/retry", body: `{"ids":[1,-2]}`, field: "ids[1]"},
		{name: "BulkRetryIDsNotArray", path: "/queue/q/failed/retry", body: `{"ids":5}`, field: "ids"},
		{name: "BulkRetryUnknownField", path: "/queue/q/failed/retry", body: `{"id":[1]}`, field: "id"},
		{name: "BulkRetryTooManyIDs", path: "/queue/q/failed/retry", body: `{"ids":[` + strings.Repeat("1,", 10000) + `1]}`, field: "ids"},
		{name: "BulkDeleteBadID", method: "DELETE", path: "/queue/q/failed", body: `{"ids":[0]}`, field: "ids[0]"},
		{name: "BulkDeleteFraction", method: "DELETE", path: "/queue/q/failed", body: `{"ids":[1.5]}`, field: "ids"},
		{name: "PutQueuePausedString", method: "PUT", path: "/queue/q", body: `{"paused":"yes"}`, field: "paused"},
	}
	for i := range tests {
		if tests[i].method == "" {
			tests[i].method = "POST"
		}
		if tests[i].path == "" {
			tests[i].path = "/job/cat"
		}
		tests[i].status = http.StatusBadRequest
	}
	tests = append(tests,
		badInput{name: "JobsElementUnrouted", method: "POST", path: "/jobs", body: `{"jobs":[{"category":"c",` + u + `}]}`, status: http.StatusNotFound, field: "jobs[0].category"},
		badInput{name: "PauseMissingQueue", method: "POST", path: "/queue/none/pause", status: http.StatusNotFound, field: "none"},
		badInput{name: "ResumeMissingQueue", method: "POST", path: "/queue/none/resume", status: http.StatusNotFound, field: "none"},
		badInput{name: "RetryMissingEntry", method: "POST", path: "/queue/q/failed/99/retry", status: http.StatusNotFound, field: "id"},
	)
	// Routed to nowhere: a server without a default queue.
	nb := setup(t, dbtest.Open(t, "sqlite"), nil)
	runBadInputs(t, nb, tests[len(tests)-4:len(tests)-3])
	runBadInputs(t, b, append(tests[:len(tests)-4:len(tests)-4], tests[len(tests)-3:]...))

	// The limits themselves are accepted.
	t.Run("Limits", func(t *testing.T) {
		t.Parallel()
		b.ok(t, "POST", "/job/cat", job(`"priority":1000,"unique_key":"`+strings.Repeat("é", 255)+
			`","retry_backoff":"exponential","retry_delay":2592000,"retry_delay_max":2592000,"retry_jitter":1`), nil)
		b.ok(t, "POST", "/job/cat", job(`"priority":-1000,"retry_jitter":0`), nil)
		b.ok(t, "POST", "/jobs", jobs(many[:1000]...), nil)
	})
}

func TestLeaseRoutes_BadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), nil)
	const tok = `"lease_token":"1.AAAAAAAAAAAAAAAAAAAAAA"`
	long := strings.Repeat("m", 4097)
	tests := []badInput{
		{name: "HeartbeatBadID", path: "/job/x/heartbeat", body: `{` + tok + `,"lease":10}`, field: "id"},
		{name: "HeartbeatZeroID", path: "/job/0/heartbeat", body: `{` + tok + `,"lease":10}`, field: "id"},
		{name: "HeartbeatNoToken", path: "/job/1/heartbeat", body: `{"lease":10}`, field: "lease_token"},
		{name: "HeartbeatTokenTooLong", path: "/job/1/heartbeat", body: `{"lease_token":"` + strings.Repeat("t", 129) + `","lease":10}`, field: "lease_token"},
		{name: "HeartbeatTokenMalformed", path: "/job/1/heartbeat", body: `{"lease_token":"nope","lease":10}`, field: "lease_token"},
		{name: "HeartbeatNoLease", path: "/job/1/heartbeat", body: `{` + tok + `}`, field: "lease: required, seconds 1..86400"},
		{name: "HeartbeatLeaseTooShort", path: "/job/1/heartbeat", body: `{` + tok + `,"lease":0.5}`, field: "lease: must be 1..86400 seconds, got 0.5"},
		{name: "HeartbeatLeaseTooLong", path: "/job/1/heartbeat", body: `{` + tok + `,"lease":86401}`, field: "lease: must be 1..86400 seconds, got 86401"},
		{name: "HeartbeatLeaseString", path: "/job/1/heartbeat", body: `{` + tok + `,"lease":"10"}`, field: "lease"},
		{name: "HeartbeatProgressAboveOne", path: "/job/1/heartbeat", body: `{` + tok + `,"lease":10,"progress":1.5}`, field: "progress"},
		{name: "HeartbeatProgressNegative", path: "/job/1/heartbeat", body: `{` + tok + `,"lease":10,"progress":-0.1}`, field: "progress"},
		{name: "HeartbeatMessageTooLong", path: "/job/1/heartbeat", body: `{` + tok + `,"lease":10,"message":"` + long + `"}`, field: "message"},
		{name: "HeartbeatUnknownField", path: "/job/1/heartbeat", body: `{` + tok + `,"lease":10,"ttl":5}`, field: "ttl"},
		{name: "CompleteNoToken", path: "/job/1/complete", body: `{"status":"success"}`, field: "lease_token"},
		{name: "CompleteNoStatus", path: "/job/1/complete", body: `{` + tok + `}`, field: "status"},
		{name: "CompleteBadStatus", path: "/job/1/complete", body: `{` + tok + `,"status":"accepted"}`, field: "status"},
		{name: "CompleteMessageTooLong", path: "/job/1/complete", body: `{` + tok + `,"status":"success","message":"` + long + `"}`, field: "message"},
		{name: "CompleteRetryAfterOnSuccess", path: "/job/1/complete", body: `{` + tok + `,"status":"success","retry_after":5}`, field: "retry_after"},
		{name: "CompleteRetryAfterNegative", path: "/job/1/complete", body: `{` + tok + `,"status":"failure","retry_after":-1}`, field: "retry_after"},
		{name: "CompleteRetryAfterTooLong", path: "/job/1/complete", body: `{` + tok + `,"status":"failure","retry_after":2592001}`, field: "retry_after"},
		{name: "CompleteEmptyBody", path: "/job/1/complete", body: ``, field: "body"},
		// A lease request is checked before its queue is looked up.
		{name: "LeaseWaitNegative", path: "/queue/q/lease", body: `{"wait":-1}`, field: "wait: must be 0..30 seconds, got -1"},
		{name: "LeaseWaitTooLong", path: "/queue/q/lease", body: `{"wait":30.5}`, field: "wait: must be 0..30 seconds, got 30.5"},
		{name: "LeaseLeaseTooShort", path: "/queue/q/lease", body: `{"lease":0.5}`, field: "lease: must be 1..86400 seconds, got 0.5"},
		{name: "LeaseLeaseTooLong", path: "/queue/q/lease", body: `{"lease":86401}`, field: "lease: must be 1..86400 seconds, got 86401"},
	}
	for i := range tests {
		tests[i].method, tests[i].status = "POST", http.StatusBadRequest
	}
	tests = append(tests,
		// Well formed, but not a token of this node's key: the lease is
		// not held.
		badInput{name: "HeartbeatForgedToken", method: "POST", path: "/job/1/heartbeat", body: `{` + tok + `,"lease":10}`, status: http.StatusConflict, field: "lease_token"},
		badInput{name: "CompleteForgedToken", method: "POST", path: "/job/1/complete", body: `{` + tok + `,"status":"success"}`, status: http.StatusConflict, field: "lease_token"},
	)
	runBadInputs(t, b, tests)
}
