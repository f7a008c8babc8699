// Package schedule is rowq's durable cron: it parses cron specs, computes
// their fire times in a time zone (with stated rules for daylight saving
// time), and runs the loop every node runs to fire due schedules exactly
// once per tick through the store.
package schedule

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Spec is a parsed cron spec: it tells when a schedule fires.
type Spec interface {
	// Next returns the first fire time strictly after t, or the zero time
	// if there is none within the search bound.
	Next(t time.Time) time.Time
}

// MinInterval is the shortest @every interval: fire times have a
// resolution of one second.
const MinInterval = time.Second

// searchYears bounds the search for a next fire time. Eight years cover
// every leap-day spec (2096 to 2104 has no 29 February in between).
const searchYears = 9

// every fires at the multiples of d since the Unix epoch: a fixed real
// spacing, whatever the time zone and its clock changes.
type every struct{ d time.Duration }

// Next returns the first multiple of the interval after t.
func (e every) Next(t time.Time) time.Time {
	n := t.UnixNano()
	d := e.d.Nanoseconds()
	k := n / d
	if n < 0 && n%d != 0 {
		k-- // floor for times before the epoch
	}
	return time.Unix(0, (k+1)*d).UTC()
}

// cron is a field spec evaluated on the wall clock of loc.
type cron struct {
	sec, min, hour uint64 // bit i set: value i matches
	dom, month     uint64 // days 1..31, months 1..12
	dow            uint64 // 0..6, Sunday = 0
	// domStar and dowStar record a day field written as * or ?: with both
	// restricted, a day matches if either matches (the cron OR rule).
	domStar, dowStar bool
	// everyHour is set when the hour field matches all 24 hours. Such a
	// schedule keeps its real spacing across clock changes; see resolve.
	everyHour bool
	loc       *time.Location
}

type field struct {
	name     string
	min, max int
	names    map[string]int
}

var (
	secondField = field{name: "second", min: 0, max: 59}
	minuteField = field{name: "minute", min: 0, max: 59}
	hourField   = field{name: "hour", min: 0, max: 23}
	domField    = field{name: "day of month", min: 1, max: 31}
	monthField  = field{name: "month", min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}}
	dowField = field{name: "day of week", min: 0, max: 7, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}}
)

var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// ErrNever is returned by Parse for a spec that matches no time within
// the search bound, such as "0 0 30 2 *".
var ErrNever = errors.New("never fires")

// Parse parses a cron spec for the time zone loc: five fields (minute,
// hour, day of month, month, day of week), six with a leading seconds
// field, a macro (@yearly, @monthly, @weekly, @daily, @hourly) or
// "@every <duration>". Fields take *, ?, numbers, names (jan, mon),
// ranges a-b, lists a,b and steps */n, a-b/n, a/n.
func Parse(spec string, loc *time.Location) (Spec, error) {
	spec = strings.TrimSpace(spec)
	if len(spec) > 256 {
		return nil, fmt.Errorf("at most 256 characters, got %d", len(spec))
	}
	if rest, ok := strings.CutPrefix(spec, "@every"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("@every wants a duration such as 30s or 1h30m: %v", err)
		}
		if d < MinInterval || d%time.Second != 0 {
			return nil, fmt.Errorf("@every interval must be a whole number of seconds, at least 1s (%s is not)", d)
		}
		return every{d}, nil
	}
	if strings.HasPrefix(spec, "@") {
		m, ok := macros[strings.ToLower(spec)]
		if !ok {
			return nil, fmt.Errorf("unknown macro %q; use @yearly, @monthly, @weekly, @daily, @hourly or @every <duration>", spec)
		}
		spec = m
	}
	fs := strings.Fields(spec)
	switch len(fs) {
	case 5:
		fs = append([]string{"0"}, fs...)
	case 6:
	default:
		return nil, fmt.Errorf("want 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first, got %d", len(fs))
	}
	if loc == nil {
		loc = time.UTC
	}
	c := &cron{loc: loc}
	var err error
	for i, p := range []struct {
		f   field
		dst *uint64
	}{{secondField, &c.sec}, {minuteField, &c.min}, {hourField, &c.hour}, {domField, &c.dom}, {monthField, &c.month}, {dowField, &c.dow}} {
		if *p.dst, err = parseField(fs[i], p.f); err != nil {
			return nil, err
		}
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow = c.dow&^(1<<7) | 1
	}
	c.domStar = fs[3] == "*" || fs[3] == "?"
	c.dowStar = fs[5] == "*" || fs[5] == "?"
	c.everyHour = c.hour == 1<<24-1
	if c.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fmt.Errorf("%w: no date matches its day and month fields", ErrNever)
	}
	return c, nil
}

func parseField(s string, f field) (uint64, error) {
	var set uint64
	for part := range strings.SplitSeq(s, ",") {
		bitsOf, err := parseRange(part, f)
		if err != nil {
			return 0, err
		}
		set |= bitsOf
	}
	return set, nil
}

func parseRange(s string, f field) (uint64, error) {
	rng, stepText, hasStep := strings.Cut(s, "/")
	lo, hi := f.min, f.max
	switch {
	case rng == "*" || rng == "?":
	default:
		a, b, isRange := strings.Cut(rng, "-")
		var err error
		if lo, err = parseValue(a, f); err != nil {
			return 0, err
		}
		hi = lo
		if isRange {
			if hi, err = parseValue(b, f); err != nil {
				return 0, err
			}
			if hi < lo {
				return 0, fmt.Errorf("%s: range %q ends before it starts", f.name, rng)
			}
		} else if hasStep {
			hi = f.max // a/n: from a to the end
		}
	}
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 || n > f.max {
			return 0, fmt.Errorf("%s: step must be 1..%d, got %q", f.name, f.max, stepText)
		}
		step = n
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << v
	}
	return set, nil
}

func parseValue(s string, f field) (int, error) {
	if v, ok := f.names[strings.ToLower(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < f.min || v > f.max {
		return 0, fmt.Errorf("%s: want %d..%d, got %q", f.name, f.min, f.max, s)
	}
	return v, nil
}

// dayMatches applies the day-of-month, day-of-week and month fields to a
// civil date; with both day fields restricted, either may match.
func (c *cron) dayMatches(d time.Time) bool {
	if c.month&(1<<int(d.Month())) == 0 {
		return false
	}
	domOK := c.dom&(1<<d.Day()) != 0
	dowOK := c.dow&(1<<int(d.Weekday())) != 0
	if c.domStar || c.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// nextBit returns the lowest set bit of set at or above from.
func nextBit(set uint64, from int) (int, bool) {
	if from > 63 {
		return 0, false
	}
	rest := set >> from << from
	if rest == 0 {
		return 0, false
	}
	return bits.TrailingZeros64(rest), true
}

// nextCivil returns the first wall-clock time at or after w (a civil time
// carried in a UTC time.Time) that matches every field.
func (c *cron) nextCivil(w time.Time) (time.Time, bool) {
	end := w.AddDate(searchYears, 0, 0)
	for w.Before(end) {
		if !c.dayMatches(w) {
			w = time.Date(w.Year(), w.Month(), w.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		h, ok := nextBit(c.hour, w.Hour())
		if !ok {
			w = time.Date(w.Year(), w.Month(), w.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if h != w.Hour() {
			w = time.Date(w.Year(), w.Month(), w.Day(), h, 0, 0, 0, time.UTC)
		}
		m, ok := nextBit(c.min, w.Minute())
		if !ok {
			w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour()+1, 0, 0, 0, time.UTC)
			continue
		}
		if m != w.Minute() {
			w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), m, 0, 0, time.UTC)
		}
		s, ok := nextBit(c.sec, w.Second())
		if !ok {
			w = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute()+1, 0, 0, time.UTC)
			continue
		}
		return time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), s, 0, time.UTC), true
	}
	return time.Time{}, false
}

// civil returns t's wall clock in loc as a UTC-carried civil time.
func civil(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), 0, time.UTC)
}

// resolve maps a wall-clock time to the instants the schedule fires at:
//   - a time that exists once fires once;
//   - a time skipped by a spring-forward gap fires at the first instant
//     after the gap, unless the schedule runs every hour: then the next
//     hour's run keeps the real spacing and the skipped time fires nothing;
//   - a time that occurs twice (fall-back) fires at its first occurrence
//     only, unless the schedule runs every hour: then at both, one real
//     hour apart.
func (c *cron) resolve(w time.Time) []time.Time {
	u := w.Unix() // the wall clock read as if it were UTC
	var out []time.Time
	// Every real offset lies in -12h..+14h, so the instant lies in this
	// window; at most one clock change falls in it.
	offBefore := offsetAt(u-14*3600, c.loc)
	offAfter := offsetAt(u+14*3600, c.loc)
	for _, off := range []int{offBefore, offAfter} {
		i := u - int64(off)
		if offsetAt(i, c.loc) == off && (len(out) == 0 || out[0].Unix() != i) {
			out = append(out, time.Unix(i, 0).UTC())
		}
	}
	switch {
	case len(out) == 0: // in a gap
		if c.everyHour {
			return nil
		}
		start, _ := time.Unix(u-int64(offBefore), 0).In(c.loc).ZoneBounds()
		return []time.Time{start.UTC()}
	case len(out) == 2:
		if out[1].Before(out[0]) {
			out[0], out[1] = out[1], out[0]
		}
		if !c.everyHour {
			return out[:1]
		}
	}
	return out
}

func offsetAt(unix int64, loc *time.Location) int {
	_, off := time.Unix(unix, 0).In(loc).Zone()
	return off
}

// offsetRange returns the lowest and highest offset of loc from 3 hours
// before to 3 hours after the Unix time u: near a clock change, the wall
// clock is u plus one of the two.
func (c *cron) offsetRange(u int64) (lo, hi int64) {
	a, b := int64(offsetAt(u-3*3600, c.loc)), int64(offsetAt(u+3*3600, c.loc))
	return min(a, b), max(a, b)
}

// Next returns the first fire time after t. Wall-clock order is time order
// except near a clock change, so it scans the wall times that can map to
// an instant after t (from t plus its lowest nearby offset), and stops
// once no later wall time can map to an instant before the best found.
func (c *cron) Next(t time.Time) time.Time {
	t = t.Truncate(time.Second)
	lo, _ := c.offsetRange(t.Unix())
	w := time.Unix(t.Unix()+lo, 0).UTC()
	var best time.Time
	var limit int64 // wall times after it cannot beat best
	for {
		var ok bool
		w, ok = c.nextCivil(w)
		if !ok || (!best.IsZero() && w.Unix() > limit) {
			return best
		}
		for _, i := range c.resolve(w) {
			if i.After(t) && (best.IsZero() || i.Before(best)) {
				best = i
				_, hi := c.offsetRange(i.Unix())
				limit = i.Unix() + hi
			}
		}
		w = w.Add(time.Second)
	}
}
