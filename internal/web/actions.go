package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/rowqtype"
)

// ActFunc serves a request of the JSON API for a grant the dashboard
// authenticated, and returns the answer's status and JSON body:
// (*httpapi.API).Act. Every action of the dashboard is a request of the
// API served through it, so that an action follows the API's rules (its
// scopes, its queue confinement, its validation) by running the API's
// own code; the dashboard only turns a form into that request.
type ActFunc func(r *http.Request, g *auth.Grant) (status int, body []byte)

// action is one form of the dashboard that changes something: it asks
// for a confirmation, then makes a request of the JSON API.
type action struct {
	pattern string     // the form's route
	scope   auth.Scope // what it needs beyond read (admin holds all)
	what    string     // what the path's {name} names, for a refusal
	// plan turns the form into the API request, or an error naming the
	// form's field (400).
	plan func(r *http.Request, name string) (*plan, error)
}

// plan is the API request of an action, the question that confirms it
// and the message that tells it is done.
type plan struct {
	method, path string
	body         any // JSON; nil for none
	question     string
	done         func(answer map[string]any) string
}

// doneMsg returns a done function that always says msg.
func doneMsg(msg string) func(map[string]any) string {
	return func(map[string]any) string { return msg }
}

// count reads a count (retried, deleted) from an API answer.
func count(answer map[string]any, key string) int {
	n, _ := answer[key].(float64)
	return int(n)
}

// failedJobs says n failed jobs in words.
func failedJobs(n int) string {
	if n == 1 {
		return "1 failed job"
	}
	return strconv.Itoa(n) + " failed jobs"
}

func esc(s string) string { return url.PathEscape(s) }

// actions are the dashboard's actions.
var actions = []*action{
	{pattern: "POST /ui/queue/{name}/pause", scope: auth.Admin, what: "queue", plan: func(_ *http.Request, q string) (*plan, error) {
		return &plan{method: "POST", path: "/queue/" + esc(q) + "/pause",
			question: fmt.Sprintf("Pause queue %s? Its jobs stay stored, and none is delivered until it is resumed.", q),
			done:     doneMsg("Queue " + q + " paused.")}, nil
	}},
	{pattern: "POST /ui/queue/{name}/resume", scope: auth.Admin, what: "queue", plan: func(_ *http.Request, q string) (*plan, error) {
		return &plan{method: "POST", path: "/queue/" + esc(q) + "/resume",
			question: fmt.Sprintf("Resume queue %s? Its waiting jobs are delivered again.", q),
			done:     doneMsg("Queue " + q + " resumed.")}, nil
	}},
	{pattern: "POST /ui/queue/{name}/failed/{id}/retry", scope: auth.Admin, what: "queue", plan: func(r *http.Request, q string) (*plan, error) {
		id := r.PathValue("id")
		return &plan{method: "POST", path: "/queue/" + esc(q) + "/failed/" + esc(id) + "/retry",
			question: fmt.Sprintf("Retry failed job %s of queue %s? It leaves the failure log and waits to be delivered again, now.", id, q),
			done:     doneMsg("Failed job " + id + " retried.")}, nil
	}},
	{pattern: "POST /ui/queue/{name}/failed/{id}/delete", scope: auth.Admin, what: "queue", plan: func(r *http.Request, q string) (*plan, error) {
		id := r.PathValue("id")
		return &plan{method: "DELETE", path: "/queue/" + esc(q) + "/failed/" + esc(id),
			question: fmt.Sprintf("Delete failed job %s of queue %s from the failure log? It is not delivered again.", id, q),
			done:     doneMsg("Failed job " + id + " deleted.")}, nil
	}},
	{pattern: "POST /ui/queue/{name}/failed/retry", scope: auth.Admin, what: "queue", plan: func(r *http.Request, q string) (*plan, error) {
		req, which, err := bulk(r, q)
		if err != nil {
			return nil, err
		}
		return &plan{method: "POST", path: "/queue/" + esc(q) + "/failed/retry", body: req,
			question: fmt.Sprintf("Retry %s? %s, now.", which, plural(req, "It leaves the failure log and waits to be delivered again", "They leave the failure log and wait to be delivered again")),
			done: func(a map[string]any) string {
				return fmt.Sprintf("%s of queue %s retried.", failedJobs(count(a, "retried")), q)
			}}, nil
	}},
	{pattern: "POST /ui/queue/{name}/failed/delete", scope: auth.Admin, what: "queue", plan: func(r *http.Request, q string) (*plan, error) {
		req, which, err := bulk(r, q)
		if err != nil {
			return nil, err
		}
		return &plan{method: "DELETE", path: "/queue/" + esc(q) + "/failed", body: req,
			question: fmt.Sprintf("Delete %s from the failure log? %s not delivered again.", which, plural(req, "It is", "They are")),
			done: func(a map[string]any) string {
				return fmt.Sprintf("%s of queue %s deleted.", failedJobs(count(a, "deleted")), q)
			}}, nil
	}},
	{pattern: "POST /ui/queue/{name}/job/{id}/delete", scope: auth.Admin, what: "queue", plan: func(r *http.Request, q string) (*plan, error) {
		id := r.PathValue("id")
		return &plan{method: "DELETE", path: "/queue/" + esc(q) + "/job/" + esc(id),
			question: fmt.Sprintf("Delete job %s of queue %s? It is not delivered, and no failure is logged.", id, q),
			done:     doneMsg("Job " + id + " deleted.")}, nil
	}},
	{pattern: "POST /ui/queue/{name}/job/{id}/cancel", scope: auth.Admin, what: "queue", plan: func(r *http.Request, q string) (*plan, error) {
		id := r.PathValue("id")
		return &plan{method: "POST", path: "/queue/" + esc(q) + "/job/" + esc(id) + "/cancel",
			question: fmt.Sprintf("Cancel job %s of queue %s? Its delivery is aborted, it is not retried, and an accepting worker learns it at its next heartbeat.", id, q),
			done:     doneMsg("Job " + id + " cancelled.")}, nil
	}},
	{pattern: "POST /ui/schedule/{name}/pause", scope: auth.Admin, what: "schedule", plan: func(_ *http.Request, s string) (*plan, error) {
		return &plan{method: "POST", path: "/schedule/" + esc(s) + "/pause",
			question: fmt.Sprintf("Pause schedule %s? It enqueues no job until it is resumed.", s),
			done:     doneMsg("Schedule " + s + " paused.")}, nil
	}},
	{pattern: "POST /ui/schedule/{name}/resume", scope: auth.Admin, what: "schedule", plan: func(_ *http.Request, s string) (*plan, error) {
		return &plan{method: "POST", path: "/schedule/" + esc(s) + "/resume",
			question: fmt.Sprintf("Resume schedule %s? It runs again from its next tick.", s),
			done:     doneMsg("Schedule " + s + " resumed.")}, nil
	}},
	{pattern: "POST /ui/schedule/{name}/trigger", scope: auth.Admin, what: "schedule", plan: func(_ *http.Request, s string) (*plan, error) {
		return &plan{method: "POST", path: "/schedule/" + esc(s) + "/trigger",
			question: fmt.Sprintf("Run schedule %s now? One job is enqueued at once; its ticks do not change.", s),
			done: func(a map[string]any) string {
				if id, ok := a["job_id"].(float64); ok {
					return fmt.Sprintf("Schedule %s triggered: job %d enqueued.", s, int64(id))
				}
				return "Schedule " + s + " triggered."
			}}, nil
	}},
	{pattern: "POST /ui/lock/{name}/release", scope: auth.Locks, what: "lock", plan: func(r *http.Request, l string) (*plan, error) {
		owner, token := r.PostForm.Get("owner"), r.PostForm.Get("token")
		q := url.Values{"owner": {owner}, "token": {token}}
		return &plan{method: "DELETE", path: "/lock/" + esc(l) + "?" + q.Encode(),
			question: fmt.Sprintf("Release lock %s held by %s (token %s)? Its holder is not told: it must check its fencing token.", l, owner, token),
			done:     doneMsg("Lock " + l + " released.")}, nil
	}},
}

// bulk reads the failure log entries a bulk form names: the ids ticked,
// or every entry with all=yes. It returns the API's request and words
// for the question.
func bulk(r *http.Request, queue string) (*rowqtype.FailedBulkRequest, string, error) {
	if r.PostForm.Get("all") == "yes" {
		return &rowqtype.FailedBulkRequest{}, "every failed job of queue " + queue, nil
	}
	ids := r.PostForm["id"]
	if len(ids) == 0 {
		return nil, "", fmt.Errorf("id: tick at least one failed job (or use the button for all)")
	}
	req := &rowqtype.FailedBulkRequest{IDs: make([]int64, len(ids))}
	for i, s := range ids {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, "", fmt.Errorf("id: want an integer, got %q", s)
		}
		req.IDs[i] = n
	}
	what := "failed jobs " + strings.Join(ids, ", ")
	if len(ids) == 1 {
		what = "failed job " + ids[0]
	}
	return req, what + " of queue " + queue, nil
}

// plural returns one when a bulk request names one failure log entry,
// else many.
func plural(req *rowqtype.FailedBulkRequest, one, many string) string {
	if len(req.IDs) == 1 {
		return one
	}
	return many
}

// confirmField is the form field that says the action was confirmed.
const confirmField = "confirm"

// act serves an action's form. The auth decision comes first, as the
// API makes it (the scope, then the token's queues), then the CSRF
// check; a form not yet confirmed gets the confirmation page, whose form
// posts the same fields with confirm=yes; a confirmed one makes the API
// request for the grant (ActFunc) and goes back to the page it came
// from, or shows the API's refusal.
func (d *dashboard) act(a *action) http.HandlerFunc {
	return d.guard(func(w http.ResponseWriter, r *http.Request) {
		g := auth.FromContext(r.Context())
		name := r.PathValue("name")
		if err := g.Need(a.scope); err != nil {
			d.message(w, r, http.StatusForbidden, err.Error())
			return
		}
		if (d.cfg.CheckName == nil || d.cfg.CheckName("name", name) == nil) && !g.Queue(name) {
			d.message(w, r, http.StatusForbidden, g.QueueError(a.what+" "+strconv.Quote(name)).Error())
			return
		}
		if err := checkForm(w, r); err != nil {
			d.formError(w, r, err, d.message)
			return
		}
		p, err := a.plan(r, name)
		if err != nil {
			d.message(w, r, http.StatusBadRequest, err.Error())
			return
		}
		back := backTo(r)
		if r.PostForm.Get(confirmField) != "yes" {
			d.confirm(w, r, p, back)
			return
		}
		if d.cfg.Act == nil {
			d.message(w, r, http.StatusNotImplemented, "this dashboard cannot act: it serves no API")
			return
		}
		var body bytes.Buffer
		if p.body != nil {
			json.NewEncoder(&body).Encode(p.body) // of rowq's types: never fails
		}
		req, err := http.NewRequestWithContext(r.Context(), p.method, "http://rowq"+p.path, &body)
		if err != nil {
			d.message(w, r, http.StatusBadRequest, err.Error())
			return
		}
		req.Header.Set("Content-Type", "application/json")
		status, answer := d.cfg.Act(req, g)
		if status >= 300 {
			var e rowqtype.ErrorBody
			if json.Unmarshal(answer, &e) != nil || e.Error == "" {
				e.Error = strings.TrimSpace(string(answer))
			}
			d.render(w, r, status, "error.html", map[string]any{"Title": "rowq", "Message": e.Error, "Back": back})
			return
		}
		var m map[string]any
		json.Unmarshal(answer, &m)
		setFlash(w, r, p.done(m))
		http.Redirect(w, r, back, http.StatusSeeOther)
	})
}

// field is one hidden field of the confirmation's form.
type field struct{ Name, Value string }

// confirm answers the confirmation page of an action: its question, and
// a form that posts the fields of r again with confirm=yes.
func (d *dashboard) confirm(w http.ResponseWriter, r *http.Request, p *plan, back string) {
	// In the form's order of names, so that the same form renders the
	// same page.
	var fields []field
	for _, k := range slices.Sorted(maps.Keys(r.PostForm)) {
		if k == confirmField || k == csrfField {
			continue
		}
		for _, v := range r.PostForm[k] {
			fields = append(fields, field{k, v})
		}
	}
	d.render(w, r, http.StatusOK, "confirm.html", map[string]any{
		"Title": "rowq: confirm", "Question": p.question, "Action": r.URL.Path, "Fields": fields, "Back": back,
	})
}

// backTo is the page an action's form came from (its back field), where
// the browser returns after it: a dashboard path, else /ui.
func backTo(r *http.Request) string {
	if b := r.PostForm.Get("back"); nextRE.MatchString(b) && path.Clean(b) == b && b != loginPath {
		return b
	}
	return "/ui"
}

// flashCookie carries the message of the last action to the page the
// browser is sent back to, which shows it once.
const flashCookie = "rowq_flash"

func setFlash(w http.ResponseWriter, r *http.Request, msg string) {
	http.SetCookie(w, cookie(r, flashCookie, url.QueryEscape(msg), 60))
}

// takeFlash returns the message of the flash cookie, if any, and deletes
// the cookie.
func takeFlash(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, cookie(r, flashCookie, "", -1))
	msg, _ := url.QueryUnescape(c.Value)
	return shorten(msg, 300)
}
