package web

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
)

// History is the last hour of a queue's statistics (*stats.History):
// its points, and one from the last to now with the counters current.
type History interface {
	Points(queue string, now time.Time, current store.StatsCounters) []stats.Point
}

// chart is one chart of a queue's page: an inline SVG drawn here, so that
// the page needs no script and no image route to show it.
type chart struct {
	ID, Title string
	SVG       template.HTML
}

// Size of a chart, in CSS pixels, and of its margins.
const (
	chartW, chartH   = 300, 110
	padL, padR       = 40, 6
	padTop, padBelow = 8, 18
)

// charts draws the queue's last hour: throughput (jobs finished per
// minute), failures (deliveries that failed per minute) and the mean
// enqueue→delivery latency (how long a delivered job waited in the queue
// after it was due). Nil when there is no history yet.
func charts(points []stats.Point, now time.Time, window time.Duration) []chart {
	if len(points) == 0 {
		return nil
	}
	perMin := func(n int64, span time.Duration) float64 {
		if span <= 0 {
			return 0
		}
		return float64(n) / span.Minutes()
	}
	var thr, fail, lat []xy
	for _, p := range points {
		thr = append(thr, xy{p.At, perMin(p.Completes, p.Span)})
		fail = append(fail, xy{p.At, perMin(p.Failures, p.Span)})
		if p.Pops > 0 {
			lat = append(lat, xy{p.At, float64(p.WaitMs) / float64(p.Pops)})
		} else {
			lat = append(lat, xy{p.At, -1}) // nothing delivered: a gap
		}
	}
	return []chart{
		{ID: "throughput", Title: "Throughput: jobs finished per minute", SVG: svg("throughput", thr, now, window, "/min")},
		{ID: "failures", Title: "Failures: failed deliveries per minute", SVG: svg("failures", fail, now, window, "/min")},
		{ID: "latency", Title: "Latency: mean wait from due to delivery, ms", SVG: svg("latency", lat, now, window, "ms")},
	}
}

// xy is a point of a chart; a negative y is a gap.
type xy struct {
	at time.Time
	y  float64
}

// svg draws a line chart of pts over the window that ends at now, its y
// axis from 0 to a round maximum; each point's title (a hover) gives its
// value with unit.
func svg(class string, pts []xy, now time.Time, window time.Duration, unit string) template.HTML {
	top := 0.0
	for _, p := range pts {
		top = max(top, p.y)
	}
	top = roundUp(top)
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padTop-padBelow)
	x := func(t time.Time) float64 {
		f := 1 - float64(now.Sub(t))/float64(window)
		return float64(padL) + min(max(f, 0), 1)*plotW
	}
	y := func(v float64) float64 { return float64(padTop) + plotH - v/top*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`,
		chartW, chartH, chartW, chartH, class)
	fmt.Fprintf(&b, `<path class="axis" d="M%d %d V%g H%d"/>`, padL, padTop, y(0), chartW-padR)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, padL-4, padTop+8, label(top, ""))
	fmt.Fprintf(&b, `<text x="%d" y="%g" text-anchor="end">0</text>`, padL-4, y(0))
	fmt.Fprintf(&b, `<text x="%d" y="%d">−%d min</text>`, padL, chartH-4, int(window.Minutes()))
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">now</text>`, chartW-padR, chartH-4)
	var d strings.Builder
	pen := "M"
	for _, p := range pts {
		if p.y < 0 || now.Sub(p.at) > window {
			pen = "M"
			continue
		}
		fmt.Fprintf(&d, "%s%.1f %.1f ", pen, x(p.at), y(p.y))
		pen = "L"
	}
	if d.Len() > 0 {
		fmt.Fprintf(&b, `<path class="line %s" d="%s"/>`, class, strings.TrimSpace(d.String()))
	}
	for _, p := range pts { // a dot on each point, with its value for a hover
		if p.y < 0 || now.Sub(p.at) > window {
			continue
		}
		fmt.Fprintf(&b, `<circle class="line %s" cx="%.1f" cy="%.1f" r="1.5"><title>%s: %s</title></circle>`,
			class, x(p.at), y(p.y), p.at.UTC().Format("15:04 UTC"), label(p.y, unit))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // built here of numbers and fixed text only
}

// roundUp returns the smallest of 1, 2 or 5 times a power of ten that is
// at least v (1 for v ≤ 1).
func roundUp(v float64) float64 {
	if v <= 1 {
		return 1
	}
	for p := 1.0; ; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if m*p >= v {
				return m * p
			}
		}
	}
}

// label prints a value of a chart, with its unit if not "".
func label(v float64, unit string) string {
	prec := 0
	if v < 10 && v != float64(int64(v)) {
		prec = 1
	}
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if unit != "" {
		s += " " + unit
	}
	return s
}
