package httpapi

import (
	"net/http"
	"net/url"
	"regexp"
)

// Limits on inputs. Names are used in paths, logs and SQL indexes.
const (
	maxNameLen    = 128
	maxURLLen     = 2048
	maxRunAfter   = 366 * 24 * 3600 // seconds: a year and a day
	maxRetries    = 1_000_000
	maxRetryDelay = 30 * 24 * 3600 // seconds
	maxTimeout    = 24 * 3600      // seconds
	maxWorkersCap = 10_000
	maxPollingMs  = 3_600_000
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// CheckName validates a queue name, job category or other name from a
// path, as every route of the API does; its error names field. The
// dashboard's pages use it too.
func CheckName(field, v string) error { return checkName(field, v) }

// checkName validates a queue name or job category from the path.
func checkName(field, v string) error {
	switch {
	case v == "":
		return errorf(http.StatusBadRequest, "%s: must not be empty", field)
	case len(v) > maxNameLen:
		return errorf(http.StatusBadRequest, "%s: at most %d characters, got %d", field, maxNameLen, len(v))
	case !nameRE.MatchString(v) || v == "." || v == "..":
		return errorf(http.StatusBadRequest, "%s: %q: use letters, digits and _ . : - only", field, v)
	}
	return nil
}

// checkURL validates a worker URL: absolute http or https with a host,
// allowed by the worker-URL policy.
func (a *API) checkURL(field, v string) error {
	if v == "" {
		return errorf(http.StatusBadRequest, "%s: required", field)
	}
	if len(v) > maxURLLen {
		return errorf(http.StatusBadRequest, "%s: at most %d characters", field, maxURLLen)
	}
	u, err := url.Parse(v)
	if err != nil {
		return errorf(http.StatusBadRequest, "%s: not a URL: %v", field, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errorf(http.StatusBadRequest, "%s: scheme must be http or https, got %q", field, u.Scheme)
	}
	if u.Host == "" {
		return errorf(http.StatusBadRequest, "%s: must name a host", field)
	}
	if err := a.cfg.WorkerURLs.CheckURL(u); err != nil {
		return errorf(http.StatusBadRequest, "%s: %v", field, err)
	}
	return nil
}

// checkRange validates an optional integer field against [lo, hi].
func checkRange(field string, v *int, lo, hi int) error {
	if v != nil && (*v < lo || *v > hi) {
		return errorf(http.StatusBadRequest, "%s: must be %d..%d, got %d", field, lo, hi, *v)
	}
	return nil
}

// valueOr returns *v, or def when v is nil.
func valueOr[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}
