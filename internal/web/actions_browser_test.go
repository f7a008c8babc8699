package web_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/rowq/rowq/internal/browsertest"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// buttonOf returns the CSS selector of the button of an action's form, on
// the page that shows it, and the boxes to tick first (a bulk action on
// ticked entries).
func buttonOf(tc actionCase) (page, button string, tick []string) {
	page = "/ui"
	if strings.HasPrefix(tc.path, "/ui/queue/mail/") {
		page = "/ui/queue/mail"
	}
	switch {
	case tc.form.Has("id"):
		button = "#retry-selected"
		if strings.HasSuffix(tc.path, "/delete") {
			button = "#delete-selected"
		}
		for _, id := range tc.form["id"] {
			tick = append(tick, `input[type=checkbox][value="`+id+`"]`)
		}
	case tc.form.Has("all"):
		button = `form[action="` + tc.path + `"]:has(input[name="all"]) button`
	default:
		button = `form[action="` + tc.path + `"] button`
	}
	return page, button, tick
}

// TestActions_InChromium clicks every action of the dashboard through in
// headless Chromium, on every database: the button opens the dialog with
// the server's question, Confirm posts the form, the browser lands back
// on its page, which says what was done, and the database shows it.
func TestActions_InChromium(t *testing.T) {
	browser := browsertest.New(t)
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		nb := setupNode(t, dialect)
		tab := browsertest.Incognito(t, browser)
		browsertest.Do(t, tab, chromedp.Navigate(nb.base+"/ui"))
		logIn(t, tab, nb.tokens["admin"], "#logout")
		for _, tc := range actionCases(nb) {
			page, button, tick := buttonOf(tc)
			if tc.before != nil {
				tc.before(t, nb)
			}
			browsertest.Do(t, tab, chromedp.Navigate(nb.base+page), chromedp.WaitVisible(chromedp.CSS(button)))
			for _, box := range tick {
				browsertest.Do(t, tab, chromedp.Click(chromedp.CSS(box)))
			}
			browsertest.Do(t, tab, chromedp.Click(chromedp.CSS(button)), chromedp.WaitVisible(chromedp.CSS("#confirm-yes")))
			question := browsertest.Get(t, tab, chromedp.Text(chromedp.CSS("#confirm-text")))
			if !strings.Contains(question, "?") {
				t.Errorf("%s: the dialog asks %q", tc.name, question)
			}
			if err := tc.effect(t, nb); err == nil {
				t.Fatalf("%s: done before Confirm was clicked", tc.name)
			}
			browsertest.Do(t, tab, chromedp.Click(chromedp.CSS("#confirm-yes")), chromedp.WaitVisible(chromedp.CSS("#flash")))
			if loc := browsertest.Get(t, tab, chromedp.Location()); loc != nb.base+page {
				t.Errorf("%s: after the action the browser is on %s, want %s", tc.name, loc, page)
			}
			flash := browsertest.Get(t, tab, chromedp.Text(chromedp.CSS("#flash")))
			if err := tc.effect(t, nb); err != nil {
				t.Errorf("%s: clicked and confirmed (the page says %q), but %v", tc.name, flash, err)
			} else {
				t.Logf("%s: %s", tc.name, flash)
			}
		}
	})
}

// TestActions_InChromiumCancel: Cancel in the dialog does nothing, and a
// read token's page has no button at all.
func TestActions_InChromiumCancel(t *testing.T) {
	browser := browsertest.New(t)
	nb := setupNode(t, "sqlite")
	tab := browsertest.Incognito(t, browser)
	browsertest.Do(t, tab, chromedp.Navigate(nb.base+"/ui"))
	logIn(t, tab, nb.tokens["admin"], "#logout")
	browsertest.Do(t, tab,
		chromedp.Click(chromedp.CSS(`form[action="/ui/queue/idle/pause"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#confirm-no")),
		chromedp.Click(chromedp.CSS("#confirm-no")),
		chromedp.WaitNotVisible(chromedp.CSS("#confirm-dialog")))
	time.Sleep(300 * time.Millisecond) // a form posted by mistake would land by now
	if q, err := nb.st.QueueGet(context.Background(), "idle"); err != nil || q.Paused {
		t.Errorf("after Cancel, queue idle: %+v, %v; want it running", q, err)
	}

	reader := browsertest.Incognito(t, browser)
	browsertest.Do(t, reader, chromedp.Navigate(nb.base+"/ui"))
	logIn(t, reader, nb.tokens["reader"], "#logout")
	if n := browsertest.Get(t, reader, chromedp.Evaluate[int](`document.querySelectorAll("form[data-confirm]").length`)); n != 0 {
		t.Errorf("a read token's page has %d action forms", n)
	}
}

// TestActions_InChromiumWithoutJavaScript: with JavaScript off, an action
// asks on a page of the server's, and its Confirm acts; the charts are
// there all the same (drawn on the server).
func TestActions_InChromiumWithoutJavaScript(t *testing.T) {
	browser := browsertest.New(t)
	nb := setupNode(t, "sqlite")
	tab := browsertest.Incognito(t, browser)
	noScript := func(ctx context.Context, target *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, target, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return chromedp.Void{}, err
	}
	browsertest.Do(t, tab, noScript, chromedp.Navigate(nb.base+"/ui"))
	logIn(t, tab, nb.tokens["admin"], "#logout")
	browsertest.Do(t, tab,
		chromedp.Click(chromedp.CSS(`form[action="/ui/schedule/nightly/pause"] button`)),
		chromedp.WaitVisible(chromedp.CSS("#question")))
	if q := browsertest.Get(t, tab, chromedp.Text(chromedp.CSS("#question"))); !strings.Contains(q, "Pause schedule nightly?") {
		t.Errorf("the confirmation page asks %q", q)
	}
	if sc, _ := nb.st.ScheduleGet(context.Background(), "nightly"); sc.Paused {
		t.Fatal("paused before the confirmation")
	}
	browsertest.Do(t, tab, chromedp.Click(chromedp.CSS("#confirm")), chromedp.WaitVisible(chromedp.CSS("#flash")))
	if sc, err := nb.st.ScheduleGet(context.Background(), "nightly"); err != nil || !sc.Paused {
		t.Errorf("after the confirmation page's Confirm, schedule nightly: %+v, %v", sc, err)
	}
	browsertest.Do(t, tab, chromedp.Navigate(nb.base+"/ui/queue/mail"), chromedp.WaitVisible(chromedp.CSS("#chart-throughput svg")))
	if n := browsertest.Get(t, tab, chromedp.Evaluate[int](`document.querySelectorAll("#charts svg").length`)); n != 3 {
		t.Errorf("%d charts on the queue's page, want 3", n)
	}
}

// TestDashboard_InChromiumLive: the page changes without a reload when
// the database does (a queue paused through the store, a job added), and
// a ticked box keeps its section as it is.
func TestDashboard_InChromiumLive(t *testing.T) {
	browser := browsertest.New(t)
	nb := setupNode(t, "sqlite")
	tab := browsertest.Incognito(t, browser)
	browsertest.Do(t, tab, chromedp.Navigate(nb.base+"/ui"))
	logIn(t, tab, nb.tokens["admin"], "#logout")
	browsertest.Do(t, tab, chromedp.WaitVisible(chromedp.CSS(`form[action="/ui/queue/idle/pause"]`)))
	mark := chromedp.Evaluate[bool](`window.rowqTestMark = true`)
	browsertest.Get(t, tab, mark)
	if _, err := nb.st.QueueSetPaused(context.Background(), "idle", true); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(tab, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`form[action="/ui/queue/idle/resume"]`))); err != nil {
		t.Fatalf("the pause did not show within 15 s without a reload: %v", err)
	}
	t.Logf("the pause showed after %v", time.Since(start).Round(time.Millisecond))
	if !browsertest.Get(t, tab, chromedp.Evaluate[bool](`window.rowqTestMark === true`)) {
		t.Error("the page was reloaded, not updated in place")
	}

	// A ticked box in the failure log: that section stays, others move on.
	browsertest.Do(t, tab, chromedp.Navigate(nb.base+"/ui/queue/mail"), chromedp.WaitVisible(chromedp.CSS("#failed-bulk")))
	browsertest.Get(t, tab, mark)
	browsertest.Do(t, tab, chromedp.Click(chromedp.CSS(`input[type=checkbox][value="`+itoa(nb.failed[0])+`"]`)))
	if _, err := nb.st.FailedJobDelete(context.Background(), "mail", nb.failed[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := nb.st.JobsInsert(context.Background(), []*store.JobInsertParams{{Queue: "mail", Category: "welcome", URL: "http://127.0.0.1:1/", Payload: []byte(`{"live":1}`)}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(tab, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.Search(`//div[@id="waiting"]//code[contains(., '{"live":1}')]`))); err != nil {
		t.Fatalf("the new waiting job did not show within 15 s: %v", err)
	}
	if !browsertest.Get(t, tab, chromedp.Evaluate[bool](`window.rowqTestMark === true && document.querySelector('input[value="`+itoa(nb.failed[0])+`"]').checked && document.getElementById("failed-`+itoa(nb.failed[1])+`") !== null`)) {
		t.Error("the failure log with a ticked box was swapped (or the page reloaded)")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestDashboard_InChromiumLiveKeepsItsPage: a page of a paged or filtered
// table (a queue's failed finished jobs) refreshes at its own place: a job
// that failed shows without a reload, one that succeeded does not.
func TestDashboard_InChromiumLiveKeepsItsPage(t *testing.T) {
	browser := browsertest.New(t)
	nb := setupNode(t, "sqlite")
	ctx := context.Background()
	if _, err := nb.st.QueuePut(ctx, &store.Queue{Name: "mail", PollingInterval: 200, MaxWorkers: 2, Paused: true, KeepFinished: 3600}); err != nil {
		t.Fatal(err)
	}
	tab := browsertest.Incognito(t, browser)
	browsertest.Do(t, tab, chromedp.Navigate(nb.base+"/ui"))
	logIn(t, tab, nb.tokens["reader"], "#logout")
	browsertest.Do(t, tab, chromedp.Navigate(nb.base+"/ui/queue/mail?status=failed"), chromedp.WaitVisible(chromedp.CSS("#finished")))
	browsertest.Get(t, tab, chromedp.Evaluate[bool](`window.rowqTestMark = true`))
	if _, err := nb.st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "mail", Node: "n1", Limit: 2, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	ok, bad := nb.jobs[0], nb.jobs[1]
	if _, err := nb.st.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: []int64{ok}, Keep: []store.FinishNote{{ID: ok}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := nb.st.JobFail(ctx, &store.JobFailParams{ID: bad, Node: "n1", Status: "permanent-failure", Message: "no", Keep: true}); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(tab, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(wait, chromedp.WaitVisible(chromedp.CSS("#finished-"+itoa(bad)))); err != nil {
		t.Fatalf("the failed job did not show within 15 s without a reload: %v", err)
	}
	if !browsertest.Get(t, tab, chromedp.Evaluate[bool](`window.rowqTestMark === true`)) {
		t.Error("the page was reloaded, not updated in place")
	}
	if browsertest.Get(t, tab, chromedp.Evaluate[bool](`document.getElementById("finished-`+itoa(ok)+`") !== null`)) {
		t.Error("the refresh of the failed jobs' page shows a job that succeeded: it fetched the page without its query")
	}
}
