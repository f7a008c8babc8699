package httpapi

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Paging limits of the listings.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// Cursors are opaque to clients: base64url of a tagged sort key, so that a
// cursor of one listing is refused by another.
const (
	cursorJob     = "j"  // next_try (µs since the epoch), id
	cursorFailed  = "f"  // id
	cursorCreated = "fc" // created_at (µs), id
	cursorLock    = "l"  // name
	cursorSched   = "s"  // name
	cursorRun     = "r"  // id
	cursorReject  = "o"  // id
	cursorQueue   = "q"  // name
	cursorFin     = "fi" // finished_at (µs), id
)

func encodeCursor(tag string, keys ...int64) string {
	parts := []string{tag}
	for _, k := range keys {
		parts = append(parts, strconv.FormatInt(k, 10))
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(parts, ":")))
}

// Times a cursor may carry: what every database can store and compare
// (MySQL's DATETIME starts at year 1000). Cursors rowq makes are always
// inside; a forged one outside would make the database refuse the query.
var (
	minCursorTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	maxCursorTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).UnixMicro()
)

// cursorTime returns the time of a cursor key, or false when it is out of
// range.
func cursorTime(us int64) (time.Time, bool) {
	return time.UnixMicro(us).UTC(), us >= minCursorTime && us <= maxCursorTime
}

// decodeCursor returns the n keys of a cursor of the tag.
func decodeCursor(s, tag string, n int) ([]int64, error) {
	bad := badCursor(s)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != n+1 || parts[0] != tag {
		return nil, bad
	}
	keys := make([]int64, n)
	for i, p := range parts[1:] {
		if keys[i], err = strconv.ParseInt(p, 10, 64); err != nil {
			return nil, bad
		}
	}
	return keys, nil
}

// badCursor is the 400 for a cursor that no page of this listing made.
func badCursor(s string) error {
	return errorf(http.StatusBadRequest, "cursor: not a cursor of this listing (use the previous page's next_cursor, or the cursor of its Link header's next URL), got %q", s)
}

// encodeNameCursor is encodeCursor for a listing ordered by name.
func encodeNameCursor(tag, name string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tag + ":" + name))
}

// decodeNameCursor returns the name of a cursor of the tag.
func decodeNameCursor(s, tag string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	name, ok := strings.CutPrefix(string(raw), tag+":")
	if err != nil || !ok || name == "" || !utf8.ValidString(name) {
		return "", badCursor(s)
	}
	return name, nil
}

// pageQuery is the common part of a listing's query string.
type pageQuery struct {
	limit  int
	cursor string
	order  string
}

// parsePageQuery reads limit, cursor and order; order must be one of
// orders, the first being the default; a listing without orders ignores
// order. Unknown parameters are ignored, as Fireworq does.
func parsePageQuery(r *http.Request, orders ...string) (*pageQuery, error) {
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	p := &pageQuery{limit: defaultPageSize, cursor: q.Get("cursor")}
	if len(orders) > 0 {
		p.order = orders[0]
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			return nil, errorf(http.StatusBadRequest, "limit: must be an integer 1..%d, got %q", maxPageSize, v)
		}
		p.limit = n
	}
	if v := q.Get("order"); v != "" && len(orders) > 0 {
		ok := false
		for _, o := range orders {
			ok = ok || v == o
		}
		if !ok {
			return nil, errorf(http.StatusBadRequest, "order: must be one of %s, got %q", strings.Join(orders, ", "), v)
		}
		p.order = v
	}
	return p, nil
}

// parseQuery parses a query string like url.ParseQuery, but refuses a
// parameter it cannot decode (url.Values drops it silently) with an error
// naming the parameter.
func parseQuery(raw string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err == nil {
		return q, nil
	}
	for _, pair := range strings.Split(raw, "&") {
		key, value, _ := strings.Cut(pair, "=")
		if k, err := url.QueryUnescape(key); err != nil {
			return nil, errorf(http.StatusBadRequest, "query: parameter name %q is not URL-encoded correctly", key)
		} else if _, err := url.QueryUnescape(value); err != nil {
			return nil, errorf(http.StatusBadRequest, "%s: value is not URL-encoded correctly, got %q", k, value)
		}
	}
	return nil, errorf(http.StatusBadRequest, "query: %v", err)
}

// existingQueue validates the queue name of the path and checks that the
// queue exists.
func (a *API) existingQueue(ctx context.Context, r *http.Request) (string, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return "", err
	}
	if _, err := a.cfg.Store.QueueGet(ctx, name); err != nil {
		return "", notFound(err, "queue %q does not exist", name)
	}
	return name, nil
}
