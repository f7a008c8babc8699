package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Samples, for a soak (Options.Sample): once an interval while the load
// runs, the run reads each node's memory and goroutines (its /metrics), the
// size of every table (store.InspectStore.TablesSize) and the latency of
// the jobs first delivered in the interval, so that a long run shows
// whether any of them grows.

// Sample is one interval of a soak.
type Sample struct {
	AtS float64 `json:"at_s"` // seconds since the load began
	// Load1 is the host's 1-minute load average: the nodes, the database
	// and the load share the host with whatever else runs there.
	Load1  float64        `json:"load1"`
	Nodes  []*NodeSample  `json:"nodes"`
	Tables []*TableSample `json:"tables"`
	// Delivered counts the jobs first delivered in the interval;
	// LatencyP50MS and LatencyP99MS are, over those, the time from sending
	// the enqueue request to the delivery reaching the worker.
	Delivered    int     `json:"delivered"`
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
}

// NodeSample is one node's process at a sample: its resident memory
// (process_resident_memory_bytes) and goroutines (go_goroutines).
type NodeSample struct {
	Node       string  `json:"node"`
	RSSMB      float64 `json:"rss_mb"`
	Goroutines int     `json:"goroutines"`
}

// TableSample is one table at a sample, as store.TableSize.
type TableSample struct {
	Name     string `json:"name"`
	Rows     int64  `json:"rows"`
	Bytes    int64  `json:"bytes"`
	DeadRows int64  `json:"dead_rows"`
}

// firstDelivery is when job seq reached the worker for the first time.
type firstDelivery struct {
	seq int
	at  time.Time
}

// sampleLoad takes a sample every o.Sample until loadDone is closed, and
// returns them.
func (r *run) sampleLoad(ctx context.Context, st store.Store, began time.Time, loadDone <-chan struct{}) []*Sample {
	var samples []*Sample
	tick := time.NewTicker(r.o.Sample)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-loadDone:
			return samples
		case <-ctx.Done():
			return samples
		}
		s := r.sample(ctx, st, time.Since(began))
		samples = append(samples, s)
		args := []any{"at", time.Duration(s.AtS * float64(time.Second)).Round(time.Second), "load1", s.Load1,
			"delivered", s.Delivered, "p50_ms", s.LatencyP50MS, "p99_ms", s.LatencyP99MS}
		for _, n := range s.Nodes {
			args = append(args, n.Node, fmt.Sprintf("%.0fMB/%dg", n.RSSMB, n.Goroutines))
		}
		for _, t := range s.Tables {
			if t.Name == "jobs" {
				args = append(args, "jobs_rows", t.Rows, "jobs_bytes", t.Bytes, "jobs_dead", t.DeadRows)
			}
		}
		r.log.Info("sample", args...)
	}
}

// sample reads the nodes, the tables and the deliveries since the last
// sample.
func (r *run) sample(ctx context.Context, st store.Store, at time.Duration) *Sample {
	s := &Sample{AtS: at.Seconds(), Load1: load1()}
	for _, n := range r.c.running() {
		ns, err := scrape(ctx, n)
		if err != nil {
			r.log.Warn("sample: read node metrics", "node", n.id, "err", err)
			continue
		}
		s.Nodes = append(s.Nodes, ns)
	}
	if tables, err := st.TablesSize(ctx); err != nil {
		r.log.Warn("sample: size tables", "err", err)
	} else {
		for _, t := range tables {
			s.Tables = append(s.Tables, &TableSample{Name: t.Name, Rows: t.Rows, Bytes: t.Bytes, DeadRows: t.DeadRows})
		}
	}
	var lat []time.Duration
	for _, f := range r.w.takeFirsts() {
		if sent := r.pushedAt[f.seq].Load(); sent != 0 {
			lat = append(lat, f.at.Sub(time.Unix(0, sent)))
		}
	}
	s.Delivered = len(lat)
	if len(lat) > 0 {
		slices.Sort(lat)
		ms := func(q float64) float64 {
			return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000
		}
		s.LatencyP50MS, s.LatencyP99MS = ms(0.50), ms(0.99)
	}
	return s
}

// scrape reads a node's resident memory and goroutines off its /metrics.
func scrape(ctx context.Context, n *node) (*NodeSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", res.Status)
	}
	ns := &NodeSample{Node: n.id}
	found := 0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "process_resident_memory_bytes":
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			ns.RSSMB, found = v/(1<<20), found+1
		case "go_goroutines":
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			ns.Goroutines, found = int(v), found+1
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if found != 2 {
		return nil, fmt.Errorf("GET /metrics: no process_resident_memory_bytes or go_goroutines")
	}
	return ns, nil
}

// load1 is the host's 1-minute load average; 0 where /proc/loadavg is
// missing.
func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, _ := strconv.ParseFloat(f, 64)
	return v
}
