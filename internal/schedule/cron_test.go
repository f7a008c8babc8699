package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// nexts returns the n fire times after from, in UTC, as RFC 3339 strings.
func nexts(t *testing.T, spec, zone string, from time.Time, n int) []string {
	t.Helper()
	s, err := Parse(spec, mustLoc(t, zone))
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	var out []string
	for range n {
		from = s.Next(from)
		out = append(out, from.UTC().Format(time.RFC3339))
	}
	return out
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestParse_Errors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, want string }{
		{"", "want 5 fields"},
		{"* * * *", "want 5 fields"},
		{"* * * * * * *", "want 5 fields"},
		{"60 * * * *", "minute: want 0..59"},
		{"* 24 * * *", "hour: want 0..23"},
		{"* * 0 * *", "day of month: want 1..31"},
		{"* * * 13 *", "month: want 1..12"},
		{"* * * * 8", "day of week: want 0..7"},
		{"* * * foo *", "month: want 1..12"},
		{"5-2 * * * *", "ends before it starts"},
		{"*/0 * * * *", "step must be"},
		{"*/x * * * *", "step must be"},
		{"1,,2 * * * *", "minute"},
		{"0 0 30 2 *", "never fires"},
		{"0 0 31 4,6,9,11 *", "never fires"},
		{"@every 0s", "at least 1s"},
		{"@every -5s", "at least 1s"},
		{"@every 1500ms", "whole number of seconds"},
		{"@every soon", "@every wants a duration"},
		{"@fortnightly", "unknown macro"},
		{"0 0 L * *", "day of month"}, // Quartz modifiers are not cron's
		{"0 0 15W * *", "day of month"},
		{"0 0 * * 5#3", "day of week"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			_, err := Parse(tc.spec, time.UTC)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) = %v, want an error containing %q", tc.spec, err, tc.want)
			}
		})
	}
}

func TestNext_Fields(t *testing.T) {
	t.Parallel()
	from := utc("2026-01-30T10:07:30Z") // a Friday
	for _, tc := range []struct {
		spec string
		want []string
	}{
		{"*/15 * * * *", []string{"2026-01-30T10:15:00Z", "2026-01-30T10:30:00Z", "2026-01-30T10:45:00Z"}},
		{"*/20 * * * * *", []string{"2026-01-30T10:07:40Z", "2026-01-30T10:08:00Z", "2026-01-30T10:08:20Z"}},
		{"0 9-17/4 * * mon-fri", []string{"2026-01-30T13:00:00Z", "2026-01-30T17:00:00Z", "2026-02-02T09:00:00Z"}},
		{"0 0 1,15 * *", []string{"2026-02-01T00:00:00Z", "2026-02-15T00:00:00Z", "2026-03-01T00:00:00Z"}},
		// Both day fields restricted: the 13th OR a Friday.
		{"0 0 13 * fri", []string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z"}},
		// Day of week restricted only: Fridays, not every day.
		{"0 0 * * 5", []string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z"}},
		{"0 0 * * 7", []string{"2026-02-01T00:00:00Z", "2026-02-08T00:00:00Z", "2026-02-15T00:00:00Z"}},
		{"0 0 29 feb *", []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z", "2036-02-29T00:00:00Z"}},
		{"30 5/10 * JAN,Dec ?", []string{"2026-01-30T15:30:00Z", "2026-01-31T05:30:00Z", "2026-01-31T15:30:00Z"}},
		{"@hourly", []string{"2026-01-30T11:00:00Z", "2026-01-30T12:00:00Z", "2026-01-30T13:00:00Z"}},
		{"@daily", []string{"2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-02T00:00:00Z"}},
		{"@weekly", []string{"2026-02-01T00:00:00Z", "2026-02-08T00:00:00Z", "2026-02-15T00:00:00Z"}},
		{"@monthly", []string{"2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z"}},
		{"@yearly", []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z"}},
		{"@every 30s", []string{"2026-01-30T10:08:00Z", "2026-01-30T10:08:30Z", "2026-01-30T10:09:00Z"}},
		{"@every 1h30m", []string{"2026-01-30T10:30:00Z", "2026-01-30T12:00:00Z", "2026-01-30T13:30:00Z"}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			got := nexts(t, tc.spec, "UTC", from, len(tc.want))
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("next of %q after %s:\n got %v\nwant %v", tc.spec, from.Format(time.RFC3339), got, tc.want)
			}
		})
	}
}

// TestNext_DST states the clock-change rules: a fixed local time that a
// spring-forward gap skips fires at the first instant after the gap; one
// that a fall-back repeats fires once, at its first occurrence; schedules
// that run every hour, and intervals, keep their real spacing.
func TestNext_DST(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec, zone, from string
		want                   []string
	}{
		// New York, 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00Z).
		{"NY spring daily in gap", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z", "2026-03-10T06:30:00Z"}},
		{"NY spring daily 02:00 in gap", "0 2 * * *", "America/New_York", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"}},
		{"NY spring several times in gap fire once", "0,15,30,45 2 * * *", "America/New_York", "2026-03-08T06:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:00:00Z"}},
		{"NY spring hourly keeps spacing", "30 * * * *", "America/New_York", "2026-03-08T05:00:00Z",
			[]string{"2026-03-08T05:30:00Z", "2026-03-08T06:30:00Z", "2026-03-08T07:30:00Z", "2026-03-08T08:30:00Z"}},
		{"NY spring top of hour", "0 * * * *", "America/New_York", "2026-03-08T05:30:00Z",
			[]string{"2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z"}},
		{"NY spring interval", "@every 30m", "America/New_York", "2026-03-08T06:00:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}},
		// New York, 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00Z);
		// 01:30 happens at 05:30Z and again at 06:30Z.
		{"NY fall daily repeated runs once", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NY fall daily from inside the overlap", "30 1 * * *", "America/New_York", "2026-11-01T05:45:00Z",
			[]string{"2026-11-02T06:30:00Z"}},
		{"NY fall hourly keeps spacing", "30 * * * *", "America/New_York", "2026-11-01T04:00:00Z",
			[]string{"2026-11-01T04:30:00Z", "2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z", "2026-11-01T07:30:00Z"}},
		{"NY fall quarter hours keep spacing", "*/15 * * * *", "America/New_York", "2026-11-01T05:40:00Z",
			[]string{"2026-11-01T05:45:00Z", "2026-11-01T06:00:00Z", "2026-11-01T06:15:00Z", "2026-11-01T06:30:00Z", "2026-11-01T06:45:00Z", "2026-11-01T07:00:00Z"}},
		{"NY fall interval", "@every 1h", "America/New_York", "2026-11-01T04:30:00Z",
			[]string{"2026-11-01T05:00:00Z", "2026-11-01T06:00:00Z", "2026-11-01T07:00:00Z"}},
		// Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00Z).
		{"Berlin spring daily in gap", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"Berlin spring hourly keeps spacing", "30 * * * *", "Europe/Berlin", "2026-03-29T00:00:00Z",
			[]string{"2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z", "2026-03-29T02:30:00Z"}},
		// Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00Z).
		{"Berlin fall daily repeated runs once", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"Berlin fall hourly keeps spacing", "0 * * * *", "Europe/Berlin", "2026-10-24T23:30:00Z",
			[]string{"2026-10-25T00:00:00Z", "2026-10-25T01:00:00Z", "2026-10-25T02:00:00Z"}},
		{"Berlin fall seconds field", "0 30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z",
			[]string{"2026-10-26T01:30:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nexts(t, tc.spec, tc.zone, utc(tc.from), len(tc.want))
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("next of %q in %s after %s:\n got %v\nwant %v", tc.spec, tc.zone, tc.from, got, tc.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/5 1-3 * jan-mar mon,fri", "0 0 30 2 *", "@every 1s", "@daily", "1-59/7 * * * * *", "0 0 29 2 1"} {
		f.Add(s, "America/New_York")
	}
	f.Fuzz(func(t *testing.T, spec, zone string) {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			loc = time.UTC
		}
		s, err := Parse(spec, loc)
		if err != nil {
			return
		}
		from := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)
		for range 3 {
			next := s.Next(from)
			if next.IsZero() {
				return
			}
			if !next.After(from) {
				t.Fatalf("Next(%v) = %v, not after it", from, next)
			}
			from = next
		}
	})
}
