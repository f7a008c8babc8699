package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server/servertest"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// nodeBundle is a real rowq node with authentication on, over a database
// filled with what the actions act on, its tokens by name, and the
// database's store (to check an action's effect).
type nodeBundle struct {
	st      store.Store
	base    string
	tokens  map[string]string
	failed  []int64 // failure log ids of queue mail, oldest first
	jobs    []int64 // waiting jobs of queue mail
	grabbed int64   // a job of queue mail in delivery by the node
	lock    *store.LockLease
}

// setupNode starts the node and fills its database: queue mail (paused,
// so that its jobs stay put) with six entries in its failure log and two
// waiting jobs, queue idle (running, empty), the schedules mail-daily
// and nightly (routed to mail), and the lock mail-deploy held.
func setupNode(t *testing.T, dialect string) *nodeBundle {
	t.Helper()
	ctx := context.Background()
	dbURL := dbtest.URL(t, dialect)
	st := dbtest.OpenURL(t, dbURL)
	nb := &nodeBundle{st: st, tokens: map[string]string{}}
	for name, scopes := range map[string][]string{"reader": {"read"}, "admin": {"admin"}, "locker": {"read", "locks"}} {
		nb.tokens[name] = newToken(t, st, name, scopes)
	}
	nb.tokens["mail-admin"] = newToken(t, st, "mail-admin", []string{"admin"}, "mai*")
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.QueuePut(ctx, &store.Queue{Name: "mail", PollingInterval: 200, MaxWorkers: 2}))
	must(st.QueueSetPaused(ctx, "mail", true))
	must(st.QueuePut(ctx, &store.Queue{Name: "idle", PollingInterval: 200, MaxWorkers: 1}))
	must(st.RoutingPut(ctx, &store.Routing{JobCategory: "welcome", QueueName: "mail"}))
	job := func(payload string) *store.JobInsertParams {
		return &store.JobInsertParams{Queue: "mail", Category: "welcome", URL: "http://127.0.0.1:1/", Payload: json.RawMessage(payload)}
	}
	for range 6 {
		nb.failed = append(nb.failed, nb.fail(t))
	}
	ids, err := st.JobsInsert(ctx, []*store.JobInsertParams{job(`{"w":1}`), job(`{"w":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	nb.jobs = ids
	sched := func(name string) *store.Schedule {
		return &store.Schedule{Name: name, Cron: "0 3 * * *", Timezone: "UTC", Category: "welcome", URL: "http://127.0.0.1:1/",
			Misfire: store.MisfireOnce, MaxCatchup: 1, Overlap: store.OverlapAllow, NextRunAt: time.Now().Add(time.Hour)}
	}
	must(st.SchedulePut(ctx, sched("mail-daily")))
	must(st.SchedulePut(ctx, sched("nightly")))
	res, err := st.LockAcquire(ctx, &store.LockAcquireParams{Name: "mail-deploy", Owner: "ci-7", TTL: time.Hour, Limit: 1})
	if err != nil || res.Lease == nil {
		t.Fatalf("acquire: %+v %v", res, err)
	}
	nb.lock = res.Lease

	cfg := config.Default()
	cfg.Bind = "127.0.0.1:0"
	cfg.DatabaseURL = dbURL
	cfg.QueueDefault = ""
	cfg.Auth = "on"
	srv := servertest.Start(t, cfg)
	nb.base = "http://" + srv.Addr()
	// A job in delivery by the node (as its own grab, so that no rescue
	// takes it back), for the cancel button; grabbed before the waiting
	// ones by its priority.
	inDelivery := job(`{"d":1}`)
	inDelivery.Priority = 10
	if _, err := st.JobsInsert(ctx, []*store.JobInsertParams{inDelivery}); err != nil {
		t.Fatal(err)
	}
	g, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "mail", Node: srv.NodeID(), Limit: 1, Lease: time.Hour})
	if err != nil || len(g) != 1 {
		t.Fatalf("grab the job in delivery: %v %v", g, err)
	}
	nb.grabbed = g[0].ID
	return nb
}

// fail puts a new entry into queue mail's failure log and returns its id:
// a job is inserted, and the oldest waiting one grabbed and failed for
// good (the queue keeps as many waiting jobs).
func (nb *nodeBundle) fail(t *testing.T) int64 {
	t.Helper()
	ctx := context.Background()
	_, err := nb.st.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "mail", Category: "welcome", URL: "http://127.0.0.1:1/", Payload: json.RawMessage(`{"f":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := nb.st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "mail", Node: "n1", Limit: 1, Lease: time.Minute})
	if err != nil || len(j) != 1 {
		t.Fatalf("grab the job to fail: %v %v", j, err)
	}
	f, err := nb.st.JobFail(ctx, &store.JobFailParams{ID: j[0].ID, Node: "n1", Status: "permanent-failure", Code: 422, Message: "no"})
	if err != nil {
		t.Fatal(err)
	}
	return f.ID
}

// browser returns a browser of the node, logged in with the token named.
func (nb *nodeBundle) browser(t *testing.T, token string) *browser {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(c.CloseIdleConnections)
	b := &browser{t: t, c: c, base: nb.base}
	b.login(nb.tokens[token])
	return b
}

// page returns a page of the dashboard and the CSRF token of its forms.
func (b *browser) page(path string) (string, string) {
	b.t.Helper()
	_, page := b.expect("GET", path, nil, 200)
	return page, csrf(b.t, page)
}

// actionCase is one action of the dashboard, with what it needs and does.
type actionCase struct {
	name  string
	path  string     // the form's action
	form  url.Values // its fields, csrf and confirm aside
	scope string     // the scope a reader lacks for it
	// before, if not nil, prepares the database.
	before func(t *testing.T, nb *nodeBundle)
	// effect checks, after the action, that it happened.
	effect func(t *testing.T, nb *nodeBundle) error
}

// actionCases are the dashboard's actions, by group. In order: each case
// finds the database as the ones before left it.
func actionCases(nb *nodeBundle) []actionCase {
	return slices.Concat(queueActionCases(nb), failedActionCases(nb), scheduleActionCases(), heldActionCases(nb))
}

// queueActionCases pause and resume queue idle and delete a waiting job
// of queue mail.
func queueActionCases(nb *nodeBundle) []actionCase {
	ctx := context.Background()
	return []actionCase{
		{name: "pause queue", path: "/ui/queue/idle/pause", scope: "admin", effect: queuePausedIs("idle", true)},
		{name: "resume queue", path: "/ui/queue/idle/resume", scope: "admin", effect: queuePausedIs("idle", false)},
		{name: "delete waiting job", path: "/ui/queue/mail/job/" + itoa(nb.jobs[0]) + "/delete", scope: "admin", effect: func(t *testing.T, nb *nodeBundle) error {
			if _, err := nb.st.JobGet(ctx, "mail", nb.jobs[0]); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("job %d still stored (err %v)", nb.jobs[0], err)
			}
			return mailWaiting(1)(t, nb)
		}},
	}
}

// failedActionCases retry and delete queue mail's failure log entries:
// one, those selected, then all.
func failedActionCases(nb *nodeBundle) []actionCase {
	ctx := context.Background()
	f := nb.failed
	return []actionCase{
		{name: "retry one failed job", path: "/ui/queue/mail/failed/" + itoa(f[0]) + "/retry", scope: "admin", effect: func(t *testing.T, nb *nodeBundle) error {
			if err := failedGone(f[0])(t, nb); err != nil {
				return err
			}
			return mailWaiting(2)(t, nb)
		}},
		{name: "delete one failed job", path: "/ui/queue/mail/failed/" + itoa(f[1]) + "/delete", scope: "admin", effect: failedGone(f[1])},
		{name: "retry selected failed jobs", path: "/ui/queue/mail/failed/retry", form: url.Values{"id": {itoa(f[2]), itoa(f[3])}}, scope: "admin",
			effect: func(t *testing.T, nb *nodeBundle) error {
				if err := failedGone(f[2], f[3])(t, nb); err != nil {
					return err
				}
				return mailWaiting(4)(t, nb)
			}},
		{name: "delete selected failed jobs", path: "/ui/queue/mail/failed/delete", form: url.Values{"id": {itoa(f[4])}}, scope: "admin", effect: failedGone(f[4])},
		{name: "retry all failed jobs", path: "/ui/queue/mail/failed/retry", form: url.Values{"all": {"yes"}}, scope: "admin", effect: func(t *testing.T, nb *nodeBundle) error {
			if err := failedGone(f[5])(t, nb); err != nil {
				return err
			}
			return mailWaiting(5)(t, nb)
		}},
		{name: "delete all failed jobs", path: "/ui/queue/mail/failed/delete", form: url.Values{"all": {"yes"}}, scope: "admin",
			before: func(t *testing.T, nb *nodeBundle) { nb.failed = append(nb.failed, nb.fail(t), nb.fail(t)) },
			effect: func(t *testing.T, nb *nodeBundle) error {
				fs, err := nb.st.FailedJobsList(ctx, &store.FailedJobsListParams{Queue: "mail", Limit: 10})
				if err == nil && len(fs) != 0 {
					err = fmt.Errorf("%d entries left in the failure log", len(fs))
				}
				return err
			}},
	}
}

// scheduleActionCases pause, resume and trigger the schedule mail-daily.
func scheduleActionCases() []actionCase {
	return []actionCase{
		{name: "pause schedule", path: "/ui/schedule/mail-daily/pause", scope: "admin", effect: schedulePausedIs("mail-daily", true)},
		{name: "resume schedule", path: "/ui/schedule/mail-daily/resume", scope: "admin", effect: schedulePausedIs("mail-daily", false)},
		{name: "trigger schedule", path: "/ui/schedule/mail-daily/trigger", scope: "admin", effect: mailWaiting(6)},
	}
}

// heldActionCases act on what is held: cancel the job in delivery and
// release the lock mail-deploy.
func heldActionCases(nb *nodeBundle) []actionCase {
	ctx := context.Background()
	return []actionCase{
		{name: "cancel a job in delivery", path: "/ui/queue/mail/job/" + itoa(nb.grabbed) + "/cancel", scope: "admin", effect: func(t *testing.T, nb *nodeBundle) error {
			if _, err := nb.st.JobGet(ctx, "mail", nb.grabbed); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("job %d still stored (err %v)", nb.grabbed, err)
			}
			return nil
		}},
		{name: "release lock", path: "/ui/lock/mail-deploy/release", form: url.Values{"owner": {nb.lock.Owner}, "token": {itoa(nb.lock.Token)}}, scope: "locks",
			effect: func(t *testing.T, nb *nodeBundle) error {
				if ls, err := nb.st.LockGet(ctx, "mail-deploy"); err != nil || len(ls) != 0 {
					return fmt.Errorf("lock mail-deploy still held: %v (err %v)", ls, err)
				}
				return nil
			}},
	}
}

// failedGone checks that the entries ids are no longer in queue mail's
// failure log.
func failedGone(ids ...int64) func(*testing.T, *nodeBundle) error {
	return func(t *testing.T, nb *nodeBundle) error {
		for _, id := range ids {
			if _, err := nb.st.FailedJobGet(context.Background(), "mail", id); !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("failed job %d still in the log (err %v)", id, err)
			}
		}
		return nil
	}
}

// mailWaiting checks that n jobs wait in queue mail.
func mailWaiting(n int) func(*testing.T, *nodeBundle) error {
	return func(t *testing.T, nb *nodeBundle) error {
		js, err := nb.st.JobsList(context.Background(), &store.JobsListParams{Queue: "mail", Kind: store.JobsWaiting, Limit: 100})
		if err != nil {
			return err
		}
		if len(js) != n {
			return fmt.Errorf("%d jobs waiting in mail, want %d", len(js), n)
		}
		return nil
	}
}

// queuePausedIs checks that the queue is paused, or not.
func queuePausedIs(queue string, want bool) func(*testing.T, *nodeBundle) error {
	return func(t *testing.T, nb *nodeBundle) error {
		q, err := nb.st.QueueGet(context.Background(), queue)
		if err == nil && q.Paused != want {
			err = fmt.Errorf("queue %s paused %v, want %v", queue, q.Paused, want)
		}
		return err
	}
}

// schedulePausedIs checks that the schedule is paused, or not.
func schedulePausedIs(name string, want bool) func(*testing.T, *nodeBundle) error {
	return func(t *testing.T, nb *nodeBundle) error {
		sc, err := nb.st.ScheduleGet(context.Background(), name)
		if err == nil && sc.Paused != want {
			err = fmt.Errorf("schedule %s paused %v, want %v", name, sc.Paused, want)
		}
		return err
	}
}

// with returns a copy of v with the fields kv (name, value pairs) set.
func with(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

// TestActions_Rules: every action of the dashboard, on each database,
// through a real node: a token without its scope is refused (403), as is
// a form without the session's CSRF token or sent from another site; a
// form not yet confirmed asks and changes nothing; confirmed, it acts
// and goes back to its page, which tells what was done.
func TestActions_Rules(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		nb := setupNode(t, dialect)
		admin, reader := nb.browser(t, "admin"), nb.browser(t, "reader")
		_, readerCSRF := reader.page("/ui")
		for _, tc := range actionCases(nb) {
			t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
				admin.t, reader.t = t, t
				back := "/ui/queue/mail"
				if tc.before != nil {
					tc.before(t, nb)
				}
				form := with(tc.form, "back", back)

				_, page := reader.expect("POST", tc.path, with(form, "csrf", readerCSRF, "confirm", "yes"), http.StatusForbidden)
				contains(t, "a read token's answer", page, "lacks scope "+tc.scope)

				_, tok := admin.page(back)
				_, page = admin.expect("POST", tc.path, with(form, "confirm", "yes"), http.StatusForbidden)
				contains(t, "a form without its CSRF token", page, "CSRF")
				admin.expect("POST", tc.path, with(form, "csrf", "AAAAAAAAAAAAAAAAAAAAAA", "confirm", "yes"), http.StatusForbidden)
				admin.expect("POST", tc.path, with(form, "csrf", tok, "confirm", "yes"), http.StatusForbidden, "Sec-Fetch-Site", "cross-site")

				_, page = admin.expect("POST", tc.path, with(form, "csrf", tok), http.StatusOK)
				contains(t, "the confirmation", page, `id="question"`, `name="confirm" value="yes"`, `action="`+tc.path+`"`)
				if tc.effect(t, nb) == nil {
					t.Fatal("the action happened before it was confirmed")
				}

				res, _ := admin.expect("POST", tc.path, with(form, "csrf", tok, "confirm", "yes"), http.StatusSeeOther)
				location(t, res, back)
				if err := tc.effect(t, nb); err != nil {
					t.Errorf("after the confirmed action: %v", err)
				}
				page, _ = admin.page(back)
				contains(t, "the page after the action", page, `id="flash"`)
			})
		}
	})
}

// TestActions_Confined: a token confined to mai* acts on its queues,
// schedules and locks only; a queue outside is refused whether or not it
// exists, and its buttons are not shown.
func TestActions_Confined(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		nb := setupNode(t, dialect)
		b := nb.browser(t, "mail-admin")
		page, tok := b.page("/ui")
		if strings.Contains(page, "/ui/schedule/nightly/") || strings.Contains(page, "/ui/queue/idle/") {
			t.Error("a token confined to mai* is shown buttons of nightly or idle")
		}
		if strings.Contains(page, "<h2>Nodes</h2>") {
			t.Error("a token confined to mai* is shown the nodes (GET /nodes refuses it)")
		}
		if all, _ := nb.browser(t, "admin").page("/ui"); !strings.Contains(all, "<h2>Nodes</h2>") {
			t.Error("an admin token is not shown the nodes")
		}
		contains(t, "/ui confined to mai*", page, `action="/ui/queue/mail/resume"`, `action="/ui/schedule/mail-daily/pause"`, `action="/ui/lock/mail-deploy/release"`)
		for _, path := range []string{"/ui/queue/idle/pause", "/ui/queue/nosuch/pause", "/ui/schedule/nightly/trigger", "/ui/lock/deploy/release",
			"/ui/queue/idle/failed/retry", "/ui/queue/idle/job/1/delete"} {
			_, page := b.expect("POST", path, url.Values{"csrf": {tok}, "confirm": {"yes"}, "all": {"yes"}}, http.StatusForbidden)
			contains(t, path, page, "confined to queues mai*")
		}
		if q, err := nb.st.QueueGet(context.Background(), "idle"); err != nil || q.Paused {
			t.Errorf("queue idle after a confined token's pause: %+v, %v", q, err)
		}
		b.expect("POST", "/ui/schedule/mail-daily/pause", url.Values{"csrf": {tok}, "confirm": {"yes"}}, http.StatusSeeOther)
		if sc, err := nb.st.ScheduleGet(context.Background(), "mail-daily"); err != nil || !sc.Paused {
			t.Errorf("schedule mail-daily after a confined token's pause: %+v, %v", sc, err)
		}
	})
}

// TestActions_Validation: the API's validation answers an action's form
// (its status and its message, naming the field), and the dashboard's own
// reading of the form names the field too; nothing changes.
func TestActions_Validation(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		nb := setupNode(t, dialect)
		b := nb.browser(t, "admin")
		_, tok := b.page("/ui")
		for _, tc := range []struct {
			path string
			form url.Values
			want int
			msg  string
		}{
			{"/ui/queue/mail/failed/abc/retry", nil, 400, "id: must be a positive integer"},
			{"/ui/queue/mail/failed/999999/retry", nil, 404, "no failed job 999999"},
			{"/ui/queue/mail/failed/999999/delete", nil, 404, "no failed job 999999"},
			{"/ui/queue/mail/failed/retry", nil, 400, "id: tick at least one"},
			{"/ui/queue/mail/failed/delete", url.Values{"id": {"x"}}, 400, `id: want an integer, got "x"`},
			{"/ui/queue/mail/failed/retry", url.Values{"id": {"-3"}}, 400, "ids[0]: must be a positive integer"},
			{"/ui/queue/mail/job/999999/delete", nil, 404, "no job 999999"},
			{"/ui/queue/nosuch/pause", nil, 404, `queue "nosuch" does not exist`},
			{"/ui/queue/bad%20name/pause", nil, 400, "name:"},
			{"/ui/schedule/nosuch/trigger", nil, 404, `no schedule "nosuch"`},
			{"/ui/lock/mail-deploy/release", url.Values{"token": {strconv.FormatInt(nb.lock.Token, 10)}}, 400, "owner: required"},
			{"/ui/lock/mail-deploy/release", url.Values{"owner": {"ci-7"}, "token": {"x"}}, 400, "token: want an integer"},
			{"/ui/lock/mail-deploy/release", url.Values{"owner": {"ci-7"}, "token": {strconv.FormatInt(nb.lock.Token+1, 10)}}, 409, "is not held"},
		} {
			_, page := b.expect("POST", tc.path, with(tc.form, "csrf", tok, "confirm", "yes", "back", "/ui"), tc.want)
			contains(t, tc.path, html.UnescapeString(page), tc.msg)
		}
		ctx := context.Background()
		if fs, err := nb.st.FailedJobsList(ctx, &store.FailedJobsListParams{Queue: "mail", Limit: 100}); err != nil || len(fs) != len(nb.failed) {
			t.Errorf("the failure log holds %d entries after refused actions, want %d (err %v)", len(fs), len(nb.failed), err)
		}
		if ls, err := nb.st.LockGet(ctx, "mail-deploy"); err != nil || len(ls) != 1 {
			t.Errorf("lock mail-deploy after refused releases: %v (err %v)", ls, err)
		}
	})
}

// TestActions_ButtonsFollowScopes: a read token sees no button, a token
// with locks sees the release only, an admin every one.
func TestActions_ButtonsFollowScopes(t *testing.T) {
	nb := setupNode(t, "sqlite")
	for _, tc := range []struct {
		token     string
		see, hide []string
	}{
		{"reader", nil, []string{"/pause\"", "/release\"", "/trigger\"", "/delete\"", "/retry\""}},
		{"locker", []string{`action="/ui/lock/mail-deploy/release"`}, []string{"/pause\"", "/trigger\"", "/resume\""}},
		{"admin", []string{`action="/ui/lock/mail-deploy/release"`, `action="/ui/queue/idle/pause"`, `action="/ui/schedule/nightly/trigger"`}, nil},
	} {
		b := nb.browser(t, tc.token)
		page, _ := b.page("/ui")
		qpage, _ := b.page("/ui/queue/mail")
		contains(t, tc.token+"'s overview", page, tc.see...)
		for _, s := range tc.hide {
			if strings.Contains(page, s) || strings.Contains(qpage, s) {
				t.Errorf("%s's pages show %s", tc.token, s)
			}
		}
	}
}
