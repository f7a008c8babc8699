package httpapi_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/answers.golden from the server's answers")

// Times and cursors differ from run to run; answers keep their place.
var (
	timeRE   = regexp.MustCompile(`"\d{4}-\d\d-\d\dT[^"]*"`)
	cursorRE = regexp.MustCompile(`"next_cursor":"[^"]*"`)
)

// TestAPI_AnswersByteForByte sends a request of every kind, good and bad,
// and compares the answers with testdata/answers.golden byte for byte (times
// and cursors masked): field names, their order and which are present
// ("paused": false, "existing" only with a unique key) and every error
// message. A change to an answer shows here; rewrite the file with -update
// only when the change is meant, and say so in docs/api.md.
func TestAPI_AnswersByteForByte(t *testing.T) {
	t.Parallel()
	b := setupDialect(t, "sqlite", func(o *options) { o.api.Version = "v-test"; o.api.Settings = map[string]int{"a": 1} })
	var sb bytes.Buffer
	req := func(method, path, body string) {
		res := b.do(t, method, path, body)
		s := timeRE.ReplaceAllString(string(res.body), `"TIME"`)
		s = cursorRE.ReplaceAllString(s, `"next_cursor":"CURSOR"`)
		fmt.Fprintf(&sb, "%s %s %s\n  -> %d %s", method, path, body, res.status, s) // s ends in a newline
	}
	req("PUT", "/queue/q", "")
	req("PUT", "/queue/q2", `{"max_dispatches_per_second":5,"max_burst_size":3,"paused":true,"polling_interval":10,"max_workers":3}`)
	req("PUT", "/queue/q3", `{"max_workers":0}`)
	req("PUT", "/queue/q3", `{"max_workers":"x"}`)
	req("PUT", "/queue/q3", `{"paused":1}`)
	req("PUT", "/queue/q3", `{"max_dispatches_per_second":"x"}`)
	req("PUT", "/queue/q3", `{"bogus":1}`)
	req("PUT", "/queue/q3", `[1]`)
	req("GET", "/queues", "")
	req("GET", "/queue/q", "")
	req("GET", "/queue/q2", "")
	req("GET", "/queue/nope", "")
	req("GET", "/queue/q/node", "")
	req("POST", "/queue/q2/resume", "")
	req("POST", "/queue/q2/pause", "{}")
	req("POST", "/queue/q/wake", `{"settings":true}`)
	req("POST", "/queue/q/wake", `{"settings":1}`)
	req("PUT", "/routing/c", `{"queue_name":"q"}`)
	req("PUT", "/routing/c2", `{"queue_name":"q2"}`)
	req("PUT", "/routing/c3", `{}`)
	req("PUT", "/routing/c3", `{"queue_name":5}`)
	req("GET", "/routings", "")
	req("GET", "/routing/c", "")
	req("GET", "/routing/zz", "")
	req("POST", "/job/c", `{"url":"http://w/x"}`)
	req("POST", "/job/c", `{"url":"http://w/x","payload":"str","run_after":100,"max_retries":3,"retry_delay":4,"timeout":5}`)
	req("POST", "/job/c", `{"url":"http://w/x","payload":{"a":1},"priority":7,"retry_backoff":"exponential","retry_delay":2,"retry_delay_max":60,"retry_jitter":0.5}`)
	req("POST", "/job/c", `{"url":"http://w/x","payload":null,"unique_key":"k1"}`)
	req("POST", "/job/c", `{"url":"http://w/y","unique_key":"k1"}`)
	req("POST", "/job/c", `{"url":"http://w/x","retry_delay":"x"}`)
	req("POST", "/job/c", `{"url":"http://w/x","retry_jitter":"x"}`)
	req("POST", "/job/c", `{"url":"http://w/x","unique_key":5}`)
	req("POST", "/job/c", `{"url":"http://w/x","max_retries":1e30}`)
	req("POST", "/job/c", `{"url":"http://w/x","max_retries":1.5}`)
	req("POST", "/job/c", `{"url":"http://w/x","max_retries":-1}`)
	req("POST", "/job/c", `{"url":"http://w/x","retry_delay_max":5}`)
	req("POST", "/job/c", `{"url":5}`)
	req("POST", "/job/c", `{}`)
	req("POST", "/job/c", ``)
	req("POST", "/job/c", `null`)
	req("POST", "/job/c", `{"url":"http://w/x","x":1}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c2","url":"http://w/2","run_after":50,"payload":[1]}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1","unique_key":"k1"},{"category":"c","url":"http://w/2","unique_key":"k2"}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","retry_delay":"x"}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","retry_jitter":"x"}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","unique_key":[]}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","category":5}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c"},{"category":"c","url":"http://w/1"}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},null]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},5]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1","zz":1}]}`)
	req("POST", "/jobs", `{"jobs":[{"category":"c","url":"http://w/1"},{"category":"c","url":"http://w/1"} x]}`)
	req("POST", "/jobs", `{"jobs":[]}`)
	req("POST", "/jobs", `{"jobs":5}`)
	req("POST", "/jobs", `{"jobs":[{"url":"http://w/1"}]}`)
	req("GET", "/queue/q/waiting", "")
	req("GET", "/queue/q/waiting?limit=1", "")
	req("GET", "/queue/q/deferred?order=asc", "")
	req("GET", "/queue/q/grabbed", "")
	req("GET", "/queue/q/job/1", "")
	req("DELETE", "/queue/q/job/2", "")
	req("GET", "/queue/q/job/2", "")
	req("GET", "/queue/q/failed", "")
	fs := failEntries(t, b.st, "q", 3)
	req("GET", "/queue/q/failed", "")
	req("GET", "/queue/q/failed?limit=1&order=created", "")
	req("GET", fmt.Sprintf("/queue/q/failed/%d", fs[0].ID), "")
	req("DELETE", fmt.Sprintf("/queue/q/failed/%d", fs[0].ID), "")
	req("POST", fmt.Sprintf("/queue/q/failed/%d/retry", fs[1].ID), "")
	req("POST", "/queue/q/failed/retry", `{"ids":[99999]}`)
	req("POST", "/queue/q/failed/retry", `{"ids":["x"]}`)
	req("DELETE", "/queue/q/failed", "")
	req("GET", "/queue/q/stats", "")
	req("GET", "/queues/stats", "")
	req("PUT", "/lock/l", `{"owner":"a","ttl":10}`)
	req("PUT", "/lock/l", `{"owner":"b","ttl":10}`)
	req("PUT", "/lock/l", `{"owner":"b","ttl":"x"}`)
	req("PUT", "/lock/l", `{"owner":5,"ttl":1}`)
	req("PUT", "/lock/l", `{"owner":"b","ttl":1,"limit":"x"}`)
	req("PUT", "/lock/l", `{"owner":"b","ttl":1,"limit":0}`)
	req("PUT", "/lock/s", `{"owner":"b","ttl":60.5,"wait":0,"limit":3}`)
	req("POST", "/lock/l/renew", `{"owner":"a","token":1,"ttl":20}`)
	req("POST", "/lock/l/renew", `{"owner":"a","token":99,"ttl":20}`)
	req("POST", "/lock/l/renew", `{"owner":"a","token":"x","ttl":20}`)
	req("GET", "/lock/l", "")
	req("GET", "/lock/free", "")
	req("GET", "/locks", "")
	req("GET", "/locks?limit=1", "")
	req("DELETE", "/lock/l?owner=a&token=1", "")
	req("DELETE", "/lock/l?owner=a&token=1", "")
	req("PUT", "/schedule/s", `{"cron":"0 3 * * *","category":"c","url":"http://w/s"}`)
	req("PUT", "/schedule/s2", `{"cron":"0 3 * * *","timezone":"Europe/Berlin","category":"c","url":"http://w/s","payload":{"k":1},"max_retries":2,"retry_delay":3,"timeout":4,"misfire":"all","max_catchup":5,"overlap":"skip","paused":true}`)
	req("PUT", "/schedule/s3", `{"cron":"0 3 * * *","category":"c","url":"http://w/s","max_catchup":"x"}`)
	req("PUT", "/schedule/s3", `{"cron":"0 3 * * *","category":"c","url":"http://w/s","paused":"x"}`)
	req("PUT", "/schedule/s3", `{"cron":"0 3 * * *","category":"c","url":"http://w/s","max_catchup":0}`)
	req("PUT", "/schedule/s3", `{"cron":5}`)
	req("GET", "/schedule/s", "")
	req("GET", "/schedules", "")
	req("GET", "/schedules?limit=1", "")
	req("POST", "/schedule/s/pause", "")
	req("POST", "/schedule/s/resume", "")
	req("POST", "/schedule/s/trigger", "")
	req("GET", "/schedule/s/runs", "")
	req("DELETE", "/schedule/s2", "")
	req("GET", "/version", "")
	req("GET", "/healthz", "")
	req("GET", "/settings", "")
	req("DELETE", "/routing/c2", "")
	req("DELETE", "/queue/q2", "")
	req("GET", "/nowhere", "")
	const golden = "testdata/answers.golden"
	if *update {
		if err := os.WriteFile(golden, sb.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestAPI_AnswersByteForByte -update to write it)", err)
	}
	got := sb.Bytes()
	if bytes.Equal(got, want) {
		return
	}
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range min(len(gl), len(wl)) {
		if !bytes.Equal(gl[i], wl[i]) {
			t.Fatalf("answers differ from %s at line %d:\n got: %s\nwant: %s", golden, i+1, gl[i], wl[i])
		}
	}
	t.Fatalf("answers differ from %s: %d lines, want %d", golden, len(gl), len(wl))
}
