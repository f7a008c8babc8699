package web_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rowq/rowq/internal/browsertest"
	"github.com/rowq/rowq/internal/store"
)

// TestDashboard_InChromiumJobEnds: a live job's page turns into its
// history row, with its result, without a reload when the job succeeds
// (its queue keeps its finished jobs).
func TestDashboard_InChromiumJobEnds(t *testing.T) {
	browser := browsertest.New(t)
	nb := setupNode(t, "sqlite")
	ctx := context.Background()
	if _, err := nb.st.QueuePut(ctx, &store.Queue{Name: "mail", PollingInterval: 200, MaxWorkers: 2, Paused: true, KeepFinished: 3600}); err != nil {
		t.Fatal(err)
	}
	tab := browsertest.Incognito(t, browser)
	browsertest.Do(t, tab, chromedp.Navigate(nb.base+"/ui"))
	logIn(t, tab, nb.tokens["reader"], "#logout")
	id := nb.jobs[0]
	browsertest.Do(t, tab, chromedp.Navigate(nb.base+"/ui/queue/mail/job/"+itoa(id)), chromedp.WaitVisible(chromedp.CSS(`#job [data-mark="status"]`)))
	if s := browsertest.Get(t, tab, chromedp.Text(chromedp.CSS(`#job [data-mark="status"]`))); s != "waiting" {
		t.Fatalf("the job's page says %q, want waiting", s)
	}
	browsertest.Get(t, tab, chromedp.Evaluate[bool](`window.rowqTestMark = true`))
	if _, err := nb.st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "mail", Node: "n1", Limit: 2, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	note := store.FinishNote{ID: id, Message: "sent", Result: json.RawMessage(`{"to":"ada","ok":true}`)}
	if _, err := nb.st.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: []int64{id}, Keep: []store.FinishNote{note}}); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(tab, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(wait, chromedp.WaitVisible(chromedp.CSS(`#job span.succeeded`))); err != nil {
		t.Fatalf("the job's success did not show within 15 s without a reload: %v", err)
	}
	if !browsertest.Get(t, tab, chromedp.Evaluate[bool](`window.rowqTestMark === true`)) {
		t.Error("the page was reloaded, not updated in place")
	}
	page := browsertest.Get(t, tab, chromedp.Text(chromedp.CSS(`#job`)))
	for _, want := range []string{`"ok": true`, "sent", "From the queue's history"} {
		if !strings.Contains(page, want) {
			t.Errorf("the job's page once it succeeded lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "Flow") {
		t.Error("the finished job's page still shows the live job's flow section")
	}
}
