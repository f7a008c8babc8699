package dispatch

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLeaseToken_NamesOneGrabOfOneJob(t *testing.T) {
	d := New(Config{LeaseKey: []byte("0123456789abcdef0123456789abcdef")})
	tok := d.leaseToken(42, 3)
	if g, err := d.leaseGrab(42, tok); err != nil || g != 3 {
		t.Fatalf("leaseGrab(own token) = %d, %v; want 3", g, err)
	}
	if d.leaseToken(42, 4) == tok || d.leaseToken(43, 3) == tok {
		t.Fatal("another grab or another job has the same token")
	}
	var le *LeaseError
	// Another job's token, a changed grab count, or another database's key.
	other := New(Config{LeaseKey: []byte("another key of the same length!!")})
	for name, bad := range map[string]string{
		"other job":      d.leaseToken(43, 3),
		"grab changed":   "4" + tok[1:],
		"other database": other.leaseToken(42, 3),
	} {
		if _, err := d.leaseGrab(42, bad); !errors.As(err, &le) || le.Reason != LeaseLost {
			t.Errorf("%s: leaseGrab err = %v, want a LeaseLost", name, err)
		}
	}
	for _, bad := range []string{"", "3", "x.y", "0." + strings.SplitN(tok, ".", 2)[1], "3.!!", "3.AAAA"} {
		if _, err := d.leaseGrab(42, bad); !errors.Is(err, ErrLeaseToken) {
			t.Errorf("leaseGrab(%q) err = %v, want ErrLeaseToken", bad, err)
		}
	}
}

func TestParseResponse_Accepted(t *testing.T) {
	for _, tc := range []struct {
		code   int
		body   string
		status string
		lease  time.Duration
		msg    string
	}{
		{202, `{"status":"accepted","lease":30}`, StatusAccepted, 30 * time.Second, ""},
		{200, `{"status":"accepted","lease":1.5}`, StatusAccepted, 1500 * time.Millisecond, ""},
		{200, `{"status":"accepted","lease":86400}`, StatusAccepted, MaxLease, ""},
		{202, `{"status":"accepted"}`, StatusFailure, 0, "without a lease"},
		{202, `{"status":"accepted","lease":"30"}`, StatusFailure, 0, "not a number"},
		{202, `{"status":"accepted","lease":0.5}`, StatusFailure, 0, "lease must be 1..86400"},
		{202, `{"status":"accepted","lease":86401}`, StatusFailure, 0, "lease must be 1..86400"},
		{500, `{"status":"accepted","lease":30}`, StatusFailure, 0, "must be 2xx"},
	} {
		r := parseResponse(tc.code, []byte(tc.body))
		if r.Status != tc.status || r.Lease != tc.lease || !strings.Contains(r.Message, tc.msg) || r.Code != tc.code {
			t.Errorf("parseResponse(%d, %s) = %+v, want %s, lease %v, message with %q", tc.code, tc.body, r, tc.status, tc.lease, tc.msg)
		}
	}
}
