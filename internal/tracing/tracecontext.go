// Package tracing carries W3C Trace Context through rowq and, when an
// OTLP endpoint is set, exports rowq's own spans of enqueue, grab and
// delivery with OpenTelemetry.
//
// A job keeps the traceparent and tracestate it was enqueued with, and
// every delivery sends them to the worker, so that the worker's span joins
// the enqueuer's trace. This file checks them as the W3C Trace Context
// specification (Level 1) defines them; otel.go holds the export.
package tracing

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Header names, as net/http keeps them (canonical form).
const (
	HeaderParent = "Traceparent"
	HeaderState  = "Tracestate"
)

// Limits of a tracestate (W3C Trace Context, "tracestate Limits").
const (
	// MaxState is how much of a tracestate rowq keeps: the 512
	// characters the specification asks every vendor to propagate.
	MaxState = 512
	// maxMembers bounds the list-members of a tracestate.
	maxMembers = 32
	// longMember is the length beyond which a list-member is the first
	// to go when a tracestate must be cut.
	longMember = 128
)

// parentLen is the length of a version 00 traceparent:
// 00-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>.
const parentLen = 55

// errParentForm is the message of a traceparent that is not one.
var errParentForm = errors.New("want 00-<32 lowercase hex trace-id>-<16 lowercase hex parent-id>-<2 lowercase hex flags>")

// ParseParent checks a traceparent and returns it in version 00 form,
// the one version rowq sends: a version 00 value unchanged; of a higher
// version (which may have more fields), its first four fields under
// version 00, as the specification tells a receiver to read a version it
// does not know. Version ff, an all-zero trace-id or parent-id, and
// uppercase hex are invalid.
func ParseParent(v string) (string, error) {
	if len(v) < parentLen || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return "", errParentForm
	}
	version, traceID, parentID, flags := v[0:2], v[3:35], v[36:52], v[53:55]
	for _, f := range []string{version, traceID, parentID, flags} {
		if !lowerHex(f) {
			return "", errParentForm
		}
	}
	switch {
	case version == "ff":
		return "", errors.New("version ff is invalid")
	case version == "00" && len(v) != parentLen:
		return "", fmt.Errorf("a version 00 traceparent has %d characters, got %d", parentLen, len(v))
	case len(v) > parentLen && v[parentLen] != '-':
		return "", errParentForm
	case allZero(traceID):
		return "", errors.New("trace-id must not be all zeros")
	case allZero(parentID):
		return "", errors.New("parent-id must not be all zeros")
	}
	if version == "00" {
		return v, nil
	}
	return "00" + v[2:parentLen], nil
}

// ParseState checks a tracestate: at most 32 list-members key=value,
// comma-separated, with optional spaces or tabs around each, keys unique.
// It returns the value without the white space at its ends.
func ParseState(v string) (string, error) {
	seen := map[string]bool{}
	for m := range strings.SplitSeq(v, ",") {
		m = strings.Trim(m, " \t")
		if m == "" {
			continue // empty list-members are allowed
		}
		key, value, ok := strings.Cut(m, "=")
		if !ok {
			return "", fmt.Errorf("list-member %q: want key=value", m)
		}
		if !stateKey(key) {
			return "", fmt.Errorf("key %q: want lowercase letters, digits and _ - * / (at most 256, starting with a letter), or tenant@system", key)
		}
		if !stateValue(value) {
			return "", fmt.Errorf("value of %q: want 1..256 printable ASCII characters but , and =, not ending in a space", key)
		}
		if seen[key] {
			return "", fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		if len(seen) > maxMembers {
			return "", fmt.Errorf("at most %d list-members", maxMembers)
		}
	}
	return strings.Trim(v, " \t"), nil
}

// FromHeader reads the trace context of a request as the specification
// tells a receiver to: a traceparent that is missing, sent more than once
// or invalid is ignored, and the tracestate with it (a request is never
// refused for its tracing headers, which proxies and libraries add); a
// tracestate that is invalid is dropped, and one longer than MaxState is
// cut by whole list-members, the long ones (over 128 characters) first,
// then from its end. Several tracestate headers are one list.
func FromHeader(h http.Header) (parent, state string) {
	ps := h[HeaderParent]
	if len(ps) != 1 {
		return "", ""
	}
	parent, err := ParseParent(ps[0])
	if err != nil {
		return "", ""
	}
	ss := h[HeaderState]
	if len(ss) == 0 {
		return parent, ""
	}
	state, err = ParseState(strings.Join(ss, ","))
	if err != nil {
		return parent, ""
	}
	return parent, cutState(state)
}

// cutState cuts a valid tracestate to at most MaxState characters, by
// whole list-members: first those longer than longMember, then the last.
func cutState(s string) string {
	if len(s) <= MaxState {
		return s
	}
	var members []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.Trim(m, " \t"); m != "" {
			members = append(members, m)
		}
	}
	size := func() int { return len(strings.Join(members, ",")) }
	for i := 0; i < len(members) && size() > MaxState; {
		if len(members[i]) > longMember {
			members = append(members[:i], members[i+1:]...)
			continue
		}
		i++
	}
	for size() > MaxState {
		members = members[:len(members)-1]
	}
	return strings.Join(members, ",")
}

func lowerHex(s string) bool {
	for i := range len(s) {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool { return strings.Trim(s, "0") == "" }

// stateKey reports whether k is a tracestate key: a simple key, or
// tenant@system.
func stateKey(k string) bool {
	if tenant, system, ok := strings.Cut(k, "@"); ok {
		return len(tenant) >= 1 && len(tenant) <= 241 && (lcalpha(tenant[0]) || digit(tenant[0])) && keyChars(tenant[1:]) &&
			len(system) >= 1 && len(system) <= 14 && lcalpha(system[0]) && keyChars(system[1:])
	}
	return len(k) >= 1 && len(k) <= 256 && lcalpha(k[0]) && keyChars(k[1:])
}

func keyChars(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !lcalpha(c) && !digit(c) && c != '_' && c != '-' && c != '*' && c != '/' {
			return false
		}
	}
	return true
}

// stateValue reports whether v is a tracestate value: 1..256 characters
// of 0x20..0x7e but ',' and '=', the last not a space.
func stateValue(v string) bool {
	if len(v) < 1 || len(v) > 256 || v[len(v)-1] == ' ' {
		return false
	}
	for i := range len(v) {
		if c := v[i]; c < 0x20 || c > 0x7e || c == ',' || c == '=' {
			return false
		}
	}
	return true
}

func lcalpha(c byte) bool { return 'a' <= c && c <= 'z' }
func digit(c byte) bool   { return '0' <= c && c <= '9' }
