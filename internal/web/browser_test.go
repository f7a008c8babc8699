package web_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/browsertest"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server/servertest"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testcert"
	"github.com/rowq/rowq/rowqtype"
)

// TestDashboard_InChromium opens the dashboard of a real rowq node, served
// over HTTPS, in headless Chromium: a queue and a job created through the
// API show in the page the browser rendered, and following the queue's
// link leads to its page, which lists the job.
func TestDashboard_InChromium(t *testing.T) {
	ca := testcert.NewCA(t, "rowq test CA")
	cert := ca.Issue(t)
	browser := browsertest.New(t, browsertest.TrustCert(cert.Leaf))
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		base, api := startTLSNode(t, dbtest.URL(t, dialect), ca, cert, nil)
		queue := "mail-" + dialect
		if _, err := api.PutQueue(t.Context(), queue, &rowqtype.QueueRequest{MaxWorkers: new(7), Paused: new(true)}); err != nil {
			t.Fatal(err)
		}
		if _, err := api.PutRouting(t.Context(), "welcome", queue); err != nil {
			t.Fatal(err)
		}
		if _, err := api.PushJob(t.Context(), "welcome", &rowqtype.JobRequest{URL: "http://127.0.0.1:1/", Payload: []byte(`{"to":"ada"}`)}); err != nil {
			t.Fatal(err)
		}

		tab := browsertest.Tab(t, browser)
		browsertest.Do(t, tab, chromedp.Navigate(base+"/ui"))
		row := browsertest.Get(t, tab, chromedp.Text(chromedp.Search(`//tr[td/a[text()="`+queue+`"]]`)))
		browsertest.Do(t, tab, chromedp.Click(chromedp.CSS(`a[href="/ui/queue/`+queue+`"]`)))
		// Only the queue's page has a table of waiting jobs: the query
		// waits for the click's navigation.
		waiting := browsertest.Get(t, tab, chromedp.Text(chromedp.Search(`//div[@id="waiting"]/table`)))
		title := browsertest.Get(t, tab, chromedp.Text(chromedp.CSS(`h1`)))
		if !strings.Contains(row, "paused") || !strings.Contains(row, "0 / 7") {
			t.Errorf("overview row of %s reads %q, want paused and 0 / 7 workers", queue, row)
		}
		if title != "Queue "+queue {
			t.Errorf("after the click the page's title reads %q, want %q", title, "Queue "+queue)
		}
		if !strings.Contains(waiting, "welcome") || !strings.Contains(waiting, `{"to":"ada"}`) {
			t.Errorf("waiting jobs read %q, want the job pushed through the API", waiting)
		}
	})
}

// startTLSNode runs a rowq node serving HTTPS with cert on the database
// of dbURL, its configuration changed by tweak if not nil, and returns
// its base URL and a client of it.
func startTLSNode(t *testing.T, dbURL string, ca *testcert.CA, cert *testcert.Cert, tweak func(*config.Config)) (string, *client.Client) {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Default()
	cfg.Bind = "127.0.0.1:0"
	cfg.DatabaseURL = dbURL
	cfg.QueueDefault = ""
	cfg.TLSCert, cfg.TLSKey = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	cert.WriteFiles(t, cfg.TLSCert, cfg.TLSKey)
	if tweak != nil {
		tweak(&cfg)
	}
	s := servertest.Start(t, cfg)
	hc, err := client.HTTPClient(ca.WriteFile(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	base := "https://" + s.Addr()
	return base, client.New(base, hc)
}
