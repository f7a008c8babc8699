package tracing

import (
	"net/http"
	"strings"
	"testing"
)

const (
	validParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
)

func TestParseParent(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string // want "" = invalid
	}{
		{"version 00", validParent, validParent},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"},
		{"higher version, longer", "cc-" + traceID + "-00f067aa0ba902b7-01-what-the-future-holds", "00-" + traceID + "-00f067aa0ba902b7-01"},
		{"higher version, same length", "01-" + traceID + "-00f067aa0ba902b7-09", "00-" + traceID + "-00f067aa0ba902b7-09"},
		{"empty", "", ""},
		{"version ff", "ff-" + traceID + "-00f067aa0ba902b7-01", ""},
		{"version 00 longer", validParent + "-01", ""},
		{"higher version without dash after flags", "01-" + traceID + "-00f067aa0ba902b7-01x", ""},
		{"uppercase hex", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
		{"zero trace-id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"zero parent-id", "00-" + traceID + "-0000000000000000-01", ""},
		{"short trace-id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", ""},
		{"not hex", "00-" + traceID + "-00f067aa0ba902bz-01", ""},
		{"wrong separator", "00_" + traceID + "-00f067aa0ba902b7-01", ""},
		{"white space", " " + validParent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseParent(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ParseParent(%q) = %q, want an error", tc.in, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseParent(%q) = %q, %v, want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestParseState(t *testing.T) {
	many := func(n int) string {
		var ms []string
		for i := range n {
			ms = append(ms, "k"+strings.Repeat("a", i%5)+string(rune('a'+i%26))+strings.Repeat("b", i/26)+"=v")
		}
		return strings.Join(ms, ",")
	}
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"one", "rojo=00f067aa0ba902b7", true},
		{"two with spaces", " rojo=00f067aa0ba902b7 ,\tcongo=t61rcWkgMzE ", true},
		{"multi-tenant key", "fw529a3039@dt=some-value", true},
		{"key with all its characters", "a0_-*/=x", true},
		{"empty members", "a=1,,b=2,", true},
		{"empty", "", true},
		{"32 members", many(32), true},
		{"33 members", many(33), false},
		{"no equals", "rojo", false},
		{"uppercase key", "Rojo=1", false},
		{"key starting with a digit", "1a=1", false},
		{"duplicate key", "a=1,a=2", false},
		{"empty value", "a=", false},
		{"value ending in a space", "a=1 ", true}, // the space is OWS around the member
		{"value with equals", "a=b=c", false},
		{"value with a control character", "a=\x01", false},
		{"system part too long", "t@abcdefghijklmno=1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseState(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("ParseState(%q): error %v, want ok %v", tc.in, err, tc.ok)
			}
		})
	}
}

func TestFromHeader(t *testing.T) {
	long := "big=" + strings.Repeat("x", 200)
	var small []string
	for i := range 30 {
		small = append(small, "k"+string(rune('a'+i%26))+strings.Repeat("z", i/26)+"="+strings.Repeat("v", 12))
	}
	for _, tc := range []struct {
		name              string
		parents, states   []string
		wantParent, wantS string
	}{
		{"none", nil, nil, "", ""},
		{"parent only", []string{validParent}, nil, validParent, ""},
		{"both", []string{validParent}, []string{"rojo=1,congo=2"}, validParent, "rojo=1,congo=2"},
		{"two state headers are one list", []string{validParent}, []string{"rojo=1", "congo=2"}, validParent, "rojo=1,congo=2"},
		{"invalid parent drops both", []string{"00-xyz"}, []string{"rojo=1"}, "", ""},
		{"two parents drop both", []string{validParent, validParent}, []string{"rojo=1"}, "", ""},
		{"invalid state is dropped", []string{validParent}, []string{"Rojo=1"}, validParent, ""},
		{"a long state loses its long member first", []string{validParent}, []string{long + "," + strings.Join(small, ",")},
			validParent, strings.Join(small, ",")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, p := range tc.parents {
				h.Add("traceparent", p)
			}
			for _, s := range tc.states {
				h.Add("tracestate", s)
			}
			p, s := FromHeader(h)
			if p != tc.wantParent || s != tc.wantS {
				t.Fatalf("FromHeader = %q, %q; want %q, %q", p, s, tc.wantParent, tc.wantS)
			}
			if len(s) > MaxState {
				t.Fatalf("tracestate of %d characters kept, want at most %d", len(s), MaxState)
			}
		})
	}
}

func TestCutState_FromTheEnd(t *testing.T) {
	var ms []string
	for i := range 32 {
		ms = append(ms, "k"+string(rune('a'+i%26))+strings.Repeat("z", i/26)+"="+strings.Repeat("v", 20))
	}
	in := strings.Join(ms, ",") // 32 members of 24..25 characters: > 512
	got := cutState(in)
	if len(got) > MaxState || !strings.HasPrefix(in, got) || len(got) < MaxState-30 {
		t.Fatalf("cutState kept %d characters %q, want the first members up to %d", len(got), got, MaxState)
	}
}
