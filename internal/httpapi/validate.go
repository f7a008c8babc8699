package httpapi

import (
	"errors"
	"net/http"

	"github.com/rowq/rowq/internal/validate"
)

// Limits on inputs. Those of names and jobs are internal/validate's,
// shared with the outbox.
const (
	maxNameLen    = validate.MaxNameLen
	maxURLLen     = validate.MaxURLLen
	maxRunAfter   = validate.MaxRunAfter
	maxRetries    = validate.MaxRetries
	maxRetryDelay = validate.MaxRetryDelay
	maxTimeout    = validate.MaxTimeout
	maxWorkersCap = 10_000
	maxPollingMs  = 3_600_000
)

// CheckName validates a queue name, job category or other name from a
// path, as every route of the API does; its error names field. The
// dashboard's pages use it too.
func CheckName(field, v string) error { return checkName(field, v) }

// checkName validates a queue name or job category from the path.
func checkName(field, v string) error { return badRequest(validate.Name(field, v)) }

// checkURL validates a worker URL: absolute http or https with a host,
// allowed by the worker-URL policy.
func (a *API) checkURL(field, v string) error {
	return badRequest(validate.URL(field, v, a.cfg.WorkerURLs))
}

// checkRange validates an optional integer field against [lo, hi].
func checkRange(field string, v *int, lo, hi int) error {
	return badRequest(validate.Range(field, v, lo, hi))
}

// badRequest answers a failed check (a *validate.Error) with 400.
func badRequest(err error) error {
	if err == nil {
		return nil // before errors.As, whose target would escape for nothing
	}
	var ve *validate.Error
	if errors.As(err, &ve) {
		return errorf(http.StatusBadRequest, "%s", ve.Error())
	}
	return err
}

// valueOr returns *v, or def when v is nil.
func valueOr[T any](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}
