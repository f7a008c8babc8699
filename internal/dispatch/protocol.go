package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/egress"
	"github.com/rowq/rowq/internal/signing"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/tracing"
)

// Worker result statuses (the worker protocol).
const (
	StatusSuccess          = "success"
	StatusFailure          = "failure"
	StatusPermanentFailure = "permanent-failure"
)

// maxResponse is how much of a worker's response body is read; a longer
// body is cut, and if that leaves it unparseable the delivery is a failure.
const maxResponse = 64 << 10

// maxMessage bounds the message kept in the failure log.
const maxMessage = 4096

// Bounds of a worker's result (Config.MaxResultBytes, --max-result-bytes):
// the "result" of a success answer, or of a completion, kept in the
// history of a queue that keeps its finished jobs.
const (
	DefaultMaxResultBytes = 64 << 10
	MaxMaxResultBytes     = 16 << 20
)

// maxLongAnswer bounds how much of an answer longer than maxResponse plus
// the result's cap is read, a token at a time, to find its status: the
// result over the cap is skipped, and the success it reports stands.
const maxLongAnswer = 4 * MaxMaxResultBytes

// Result is the outcome of one delivery.
type Result struct {
	Status  string // StatusSuccess, StatusFailure or StatusPermanentFailure
	Code    int    // HTTP status code; 0 when no response came
	Message string
	// RetryAfter is the worker's "retry_after" (seconds, capped at 30
	// days) on a failure; nil when absent, negative or not a number.
	RetryAfter *time.Duration
	// Lease is the worker's "lease" when it answered StatusAccepted.
	Lease time.Duration
	// Busy: the worker answered 429 or 503, whatever its body said;
	// Defer is then its Retry-After, nil when absent (flow.go).
	Busy  bool
	Defer *time.Duration
	// Unreachable: no answer came, for a connection failure or a timeout.
	Unreachable bool
	// Output is a success's "result" (any JSON value; nil for none or
	// null), at most Config.MaxResultBytes: a longer one is dropped, with
	// a note in Message.
	Output json.RawMessage
}

// requestBody is what the worker receives: the raw text of a string
// payload, else the payload's JSON, else nothing.
func requestBody(payload json.RawMessage) []byte {
	if len(payload) > 0 && payload[0] == '"' {
		var s string
		if err := json.Unmarshal(payload, &s); err == nil {
			return []byte(s)
		}
	}
	return payload
}

// deliver POSTs the job to its worker and interprets the answer. The HTTP
// status code is recorded but does not decide the outcome; the body does.
// A URL or an address the worker-URL policy refuses fails the job for
// good: delivering it again would be refused again.
func deliver(ctx context.Context, cfg *Config, j *store.Job, leaseToken string) Result {
	if j.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(j.Timeout)*time.Second)
		defer cancel()
	}
	body := requestBody(j.Payload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Status: StatusFailure, Message: truncate("build request: " + err.Error())}
	}
	// Checked again here: the job may have been stored before the allow
	// list changed, or by a schedule or a retry from the failure log.
	if err := cfg.WorkerURLs.CheckURL(req.URL); err != nil {
		return Result{Status: StatusPermanentFailure, Message: truncate("worker url refused: " + err.Error())}
	}
	setHeaders(req.Header, cfg, j, body, leaseToken)
	tracing.SetHeaders(ctx, req.Header, j.Trace)
	resp, err := cfg.Client.Do(req)
	if err != nil {
		var refused *egress.Error
		switch {
		case errors.As(err, &refused):
			return Result{Status: StatusPermanentFailure, Message: truncate("delivery " + refused.Error())}
		case errors.Is(err, context.DeadlineExceeded) && j.Timeout > 0:
			return Result{Status: StatusFailure, Message: fmt.Sprintf("timeout: no answer within %ds", j.Timeout), Unreachable: true}
		}
		return Result{Status: StatusFailure, Message: truncate("request: " + err.Error()), Unreachable: true}
	}
	defer resp.Body.Close()
	limit := int64(maxResponse + cfg.MaxResultBytes)
	answer, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	long := int64(len(answer)) > limit
	if long && bytes.HasPrefix(bytes.TrimLeft(answer, " \t\r\n"), []byte("{")) {
		// Too long to hold: read on a token at a time, skipping the result.
		res := parseLongResponse(resp.StatusCode, io.MultiReader(bytes.NewReader(answer), resp.Body), cfg.MaxResultBytes)
		busyAnswer(&res, resp.StatusCode, resp.Header)
		return res
	}
	if long {
		answer = answer[:maxResponse]
	}
	if err != nil {
		msg := "read response: " + err.Error()
		if errors.Is(err, context.DeadlineExceeded) && j.Timeout > 0 {
			msg = fmt.Sprintf("timeout: response not read within %ds", j.Timeout)
		}
		return Result{Status: StatusFailure, Code: resp.StatusCode, Message: truncate(msg), Unreachable: true}
	}
	if resp.StatusCode/100 == 3 && !json.Valid(answer) {
		// The client follows no redirect (see the server's worker client).
		return Result{Status: StatusFailure, Code: resp.StatusCode, Message: truncate(fmt.Sprintf(
			"worker answered %d, a redirect to %q, which rowq does not follow: give the job the final url", resp.StatusCode, resp.Header.Get("Location")))}
	}
	res := parseResponse(resp.StatusCode, answer)
	res.capOutput(cfg.MaxResultBytes, len(res.Output))
	busyAnswer(&res, resp.StatusCode, resp.Header)
	return res
}

// capOutput drops a success's result of size bytes over max, with a note
// in its message: the success stands.
func (r *Result) capOutput(max, size int) {
	if size <= max {
		return
	}
	r.Output = nil
	note := fmt.Sprintf("result dropped: %d bytes, over --max-result-bytes %d", size, max)
	if r.Message != "" {
		note += "; " + r.Message
	}
	r.Message = truncate(note)
}

// parseLongResponse reads an answer too long to hold in memory, a token
// at a time: the value of "result" is skipped (and so dropped, counted),
// the other members are read as parseResponse reads them. At most
// maxLongAnswer bytes are read; a longer answer is a failure.
func parseLongResponse(code int, r io.Reader, maxResult int) Result {
	dec := json.NewDecoder(io.LimitReader(r, maxLongAnswer))
	bad := func(err error) Result {
		return Result{Status: StatusFailure, Code: code, Message: truncate(fmt.Sprintf(
			"worker response of more than %d bytes is not a JSON object rowq could read: %v", maxResponse+maxResult, err))}
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return bad(err)
	}
	small := map[string]json.RawMessage{}
	var resultSize int64
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return bad(err)
		}
		key, _ := t.(string)
		if key == "result" {
			start := dec.InputOffset()
			if err := skipValue(dec); err != nil {
				return bad(err)
			}
			resultSize = dec.InputOffset() - start - 1 // the colon after the key (and any space around it) counted
			continue
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return bad(err)
		}
		if key == "status" || key == "message" || key == "retry_after" || key == "lease" {
			small[key] = v
		}
	}
	if _, err := dec.Token(); err != nil {
		return bad(err)
	}
	body, _ := json.Marshal(small)
	res := parseResponse(code, body)
	if res.Status == StatusSuccess {
		res.capOutput(maxResult, int(resultSize))
	}
	return res
}

// skipValue reads past the next JSON value of dec.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// setHeaders sets what every delivery carries: the content type, the user
// agent, the job's id, attempt, queue and category, the delivery's lease
// token, and with a signer the
// Standard Webhooks headers (as the spec spells them, in lower case).
// One slice holds every value: one allocation instead of one per header.
func setHeaders(h http.Header, cfg *Config, j *store.Job, body []byte, leaseToken string) {
	v := make([]string, 0, 10)
	set := func(name, value string) {
		v = append(v, value)
		h[name] = v[len(v)-1 : len(v) : len(v)]
	}
	set("Content-Type", "application/json")
	if cfg.UserAgent != "" {
		set("User-Agent", cfg.UserAgent)
	}
	set("Rowq-Job-Id", strconv.FormatInt(j.ID, 10))
	set("Rowq-Attempt", strconv.Itoa(j.FailCount+1))
	set("Rowq-Queue", j.Queue)
	set("Rowq-Category", j.Category)
	set(LeaseTokenHeader, leaseToken)
	if cfg.Signer != nil {
		id, ts := messageID(j), strconv.FormatInt(time.Now().Unix(), 10)
		set(signing.HeaderID, id)
		set(signing.HeaderTimestamp, ts)
		set(signing.HeaderSignature, cfg.Signer.Sign(id, ts, body))
	}
}

// messageID is a job's webhook-id: "msg_", the job id and its creation
// time in microseconds (base 36). Every attempt of the job has the same
// one, a retry from the failure log too (it keeps its id and created_at),
// and the creation time keeps ids apart across databases and after a
// MySQL auto-increment counter goes back.
func messageID(j *store.Job) string {
	b := make([]byte, 0, 32)
	b = append(b, "msg_"...)
	b = strconv.AppendInt(b, j.ID, 10)
	b = append(b, '_')
	b = strconv.AppendInt(b, j.CreatedAt.UnixMicro(), 36)
	return string(b)
}

// parseResponse reads {"status": "...", "message": "..."}. Anything else is
// a failure whose message holds the head of the body.
func parseResponse(code int, body []byte) Result {
	var r struct {
		Status  string          `json:"status"`
		Message string          `json:"message"`
		Result  json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return Result{Status: StatusFailure, Code: code, Message: truncate("worker response is not JSON: " + string(body))}
	}
	switch r.Status {
	case StatusAccepted:
		return acceptedResponse(code, body)
	case StatusFailure:
		return Result{Status: r.Status, Code: code, Message: truncate(r.Message), RetryAfter: retryAfter(body)}
	case StatusSuccess:
		res := Result{Status: r.Status, Code: code, Message: truncate(r.Message)}
		if len(r.Result) > 0 && string(r.Result) != "null" {
			res.Output = r.Result
		}
		return res
	case StatusPermanentFailure:
		return Result{Status: r.Status, Code: code, Message: truncate(r.Message)}
	default:
		return Result{Status: StatusFailure, Code: code, Message: truncate(fmt.Sprintf("worker answered unknown status %q: %s", r.Status, r.Message))}
	}
}

// acceptedResponse reads an "accepted" answer: a 2xx with a "lease" of 1 s
// to MaxLease. Anything else is a failure saying what was wrong, as the
// worker may not be holding the job.
func acceptedResponse(code int, body []byte) Result {
	var r struct {
		Lease *float64 `json:"lease"`
	}
	err := json.Unmarshal(body, &r)
	switch {
	case code/100 != 2:
		return Result{Status: StatusFailure, Code: code, Message: fmt.Sprintf("worker answered accepted with HTTP %d: an accepted answer must be 2xx", code)}
	case err != nil:
		return Result{Status: StatusFailure, Code: code, Message: "worker answered accepted with a lease that is not a number: lease must be 1..86400 seconds"}
	case r.Lease == nil:
		return Result{Status: StatusFailure, Code: code, Message: "worker answered accepted without a lease: lease must be 1..86400 seconds"}
	case *r.Lease < 1 || *r.Lease > MaxLease.Seconds():
		return Result{Status: StatusFailure, Code: code, Message: fmt.Sprintf("worker answered accepted with lease %v: lease must be 1..86400 seconds", *r.Lease)}
	}
	return Result{Status: StatusAccepted, Code: code, Lease: time.Duration(*r.Lease * float64(time.Second))}
}

// truncate cuts s to maxMessage bytes and makes it storable in every
// dialect: valid UTF-8 (MySQL) without NUL bytes (PostgreSQL).
func truncate(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= maxMessage {
		return s
	}
	// Cut on a rune boundary.
	cut := maxMessage
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}

// retryAfter reads a failure's optional "retry_after" (seconds). A value of
// the wrong type or a negative one is ignored rather than turning the
// worker's answer into an unparseable one.
func retryAfter(body []byte) *time.Duration {
	var r struct {
		RetryAfter *float64 `json:"retry_after"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.RetryAfter == nil || *r.RetryAfter < 0 {
		return nil
	}
	d := maxRetryWait
	if s := *r.RetryAfter; s < maxRetryWait.Seconds() {
		d = time.Duration(s * float64(time.Second))
	}
	return &d
}
