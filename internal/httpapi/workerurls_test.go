package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/egress"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/rowqtype"
)

// TestWorkerURLs_Policy enqueues jobs, batches and schedules with an allow
// list and --worker-deny-private: a URL the policy refuses gets a 400 that
// names the field, the URL and the setting, and stores nothing. The
// list's CIDR lets a private range through --worker-deny-private.
func TestWorkerURLs_Policy(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		policy, err := egress.Parse("https://hooks.example.com/in/,*.svc.cluster.local,10.1.0.0/16", true)
		if err != nil {
			t.Fatal(err)
		}
		b := setupDialect(t, dialect, func(o *options) { o.api.WorkerURLs = policy })
		b.ok(t, "PUT", "/queue/q", `{"paused":true}`, nil)
		b.ok(t, "PUT", "/routing/cat", `{"queue_name":"q"}`, nil)

		allowed := []string{"https://hooks.example.com/in/signup", "http://mail.ns.svc.cluster.local:8080/send", "http://10.1.2.3:9000/"}
		for _, u := range allowed {
			b.ok(t, "POST", "/job/cat", fmt.Sprintf(`{"url":%q}`, u), nil)
		}
		refused := []struct{ url, why string }{
			{"https://hooks.example.com/admin/", "--worker-url-allow (ROWQ_WORKER_URL_ALLOW)"},
			{"https://hooks.example.com/in/../admin/", "--worker-url-allow"},
			{"https://hooks.example.com.evil.test/in/", "--worker-url-allow"},
			{"http://10.2.0.1/", "--worker-url-allow"},
			{"http://169.254.169.254/latest/meta-data/", "never delivers"},
			{"http://[fd00:ec2::254]/", "never delivers"},
			{"http://192.168.1.5/", "--worker-deny-private"},
		}
		for _, r := range refused {
			t.Run("job "+r.url, func(t *testing.T) {
				msg := errorMessage(t, b.do(t, "POST", "/job/cat", fmt.Sprintf(`{"url":%q}`, r.url)), http.StatusBadRequest)
				if !strings.HasPrefix(msg, "url: ") || !strings.Contains(msg, r.why) {
					t.Errorf("error %q, want url: … %s", msg, r.why)
				}
				if !strings.Contains(msg, hostOf(r.url)) {
					t.Errorf("error %q does not name the URL", msg)
				}
			})
		}

		// A batch with one refused entry: 400 naming the entry, nothing stored.
		batch := fmt.Sprintf(`{"jobs":[{"category":"cat","url":%q},{"category":"cat","url":"https://evil.test/x"}]}`, allowed[0])
		msg := errorMessage(t, b.do(t, "POST", "/jobs", batch), http.StatusBadRequest)
		if !strings.HasPrefix(msg, "jobs[1].url: ") || !strings.Contains(msg, `"https://evil.test/x"`) || !strings.Contains(msg, "--worker-url-allow") {
			t.Errorf("POST /jobs error %q, want jobs[1].url naming the URL and the setting", msg)
		}
		var page rowqtype.JobPage
		b.ok(t, "GET", "/queue/q/waiting?limit=100", "", &page)
		if got, want := len(page.Jobs), len(allowed); got != want {
			t.Errorf("%d jobs waiting, want the %d allowed ones only", got, want)
		}

		schedule := func(u string) string {
			return fmt.Sprintf(`{"cron":"@daily","category":"cat","url":%q}`, u)
		}
		b.ok(t, "PUT", "/schedule/nightly", schedule(allowed[1]), nil)
		msg = errorMessage(t, b.do(t, "PUT", "/schedule/evil", schedule("https://evil.test/x")), http.StatusBadRequest)
		if !strings.HasPrefix(msg, "url: ") || !strings.Contains(msg, `"https://evil.test/x"`) || !strings.Contains(msg, "--worker-url-allow") {
			t.Errorf("PUT /schedule error %q, want url naming the URL and the setting", msg)
		}
		msg = errorMessage(t, b.do(t, "PUT", "/schedule/meta", schedule("http://169.254.169.254/")), http.StatusBadRequest)
		if !strings.Contains(msg, "169.254.169.254") || !strings.Contains(msg, "never delivers") {
			t.Errorf("PUT /schedule error %q, want the metadata address refused", msg)
		}
		errorMessage(t, b.do(t, "GET", "/schedule/evil", ""), http.StatusNotFound)
	})
}

// TestWorkerURLs_NoPolicy: without settings any http(s) URL is accepted,
// loopback included, but metadata addresses are refused.
func TestWorkerURLs_NoPolicy(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		b.ok(t, "PUT", "/queue/q", `{"paused":true}`, nil)
		b.ok(t, "PUT", "/routing/cat", `{"queue_name":"q"}`, nil)
		for _, u := range []string{"http://127.0.0.1:9000/", "http://192.168.1.5/run", "https://example.com/hook"} {
			b.ok(t, "POST", "/job/cat", fmt.Sprintf(`{"url":%q}`, u), nil)
		}
		msg := errorMessage(t, b.do(t, "POST", "/job/cat", `{"url":"http://100.100.100.200/latest/meta-data/"}`), http.StatusBadRequest)
		if !strings.Contains(msg, "100.100.100.200") || !strings.Contains(msg, "metadata") {
			t.Errorf("error %q, want the metadata address refused", msg)
		}
	})
}

// hostOf is the host part of an absolute URL.
func hostOf(u string) string {
	h := strings.SplitN(strings.SplitN(u, "://", 2)[1], "/", 2)[0]
	return strings.Trim(h, "[]")
}
