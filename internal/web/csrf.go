package web

import (
	"crypto/subtle"
	"errors"
	"net/http"
)

// csrfCookie names the cookie that carries the CSRF token of a browser
// without a session: on the login page, and on every page while
// authentication is off.
const csrfCookie = "rowq_csrf"

// csrfField names the hidden field of every dashboard form.
const csrfField = "csrf"

// maxFormBytes bounds the body of a dashboard form.
const maxFormBytes = 8 << 10

var crossOrigin = http.NewCrossOriginProtection()

var errCSRF = errors.New("this form did not come from this dashboard (missing or wrong CSRF token, or sent from another site): reload the page and try again")

// csrfToken returns the CSRF token the forms of the page answering r
// carry: the session's, or else that of the browser's CSRF cookie, which
// it sets when the browser has none.
func csrfToken(w http.ResponseWriter, r *http.Request) string {
	if s := sessionFrom(r.Context()); s != nil {
		return s.CSRF
	}
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) >= 16 {
		return c.Value
	}
	tok := randomToken()
	http.SetCookie(w, cookie(r, csrfCookie, tok, 0))
	return tok
}

// checkForm parses the form of a POST and checks that it came from a page
// of this dashboard: the browser does not say it was sent from another
// origin (Sec-Fetch-Site, Origin), and its csrf field is the session's
// CSRF token or, without a session, the browser's CSRF cookie (a
// double-submit cookie another site can neither read nor set, being
// SameSite=Strict and HttpOnly). SameSite=Strict alone keeps the session
// cookie off cross-site requests; the token also stops a sibling site
// under the same registrable domain. Every POST of the dashboard passes
// here before it acts.
func checkForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		return err
	}
	if err := crossOrigin.Check(r); err != nil {
		return errCSRF
	}
	want := ""
	if s := sessionFrom(r.Context()); s != nil {
		want = s.CSRF
	} else if c, err := r.Cookie(csrfCookie); err == nil {
		want = c.Value
	}
	got := r.PostForm.Get(csrfField)
	if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errCSRF
	}
	return nil
}
