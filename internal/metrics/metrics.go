// Package metrics serves rowq's Prometheus metrics (GET /metrics) from a
// registry of its own: the Go runtime's and the process's, this node's
// counts of flows (Flows), and each queue's statistics as GET
// /queues/stats reports them. Those are read
// from the database at each scrape and summed over every node, so every
// node reports the same queue series: scrape one node, or take max()
// across nodes, never sum(). The counters persist across restarts and lag
// by about a second (stats.Recorder writes each node's counts once a
// second).
//
// Per-queue series (rowq_queue_…{queue}) are given for at most
// Config.QueueLimit queues: a deployment with a queue per tenant would
// otherwise hand Prometheus 13 series per tenant. Beyond the limit the
// per-queue series are left out altogether (not an arbitrary subset, which
// would come and go), and rowq_queues_over_limit says so. The totals over
// every queue (rowq_queues_…, no label) and the number of queues
// (rowq_queues) are always given.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
)

// Config configures the metrics handler.
type Config struct {
	Store store.StatsStore
	// Outbox counts the outbox's rejects (rowq_outbox_rejects); nil
	// leaves the series out.
	Outbox store.OutboxStore
	// WorkerHosts reads the worker hosts the queues' leaders slow down or
	// hold back (rowq_worker_host_*); nil leaves the series out.
	WorkerHosts store.WorkerHostStore
	// Flows are this node's counts of callbacks, releases and ends of
	// flows (rowq_flow_*); nil leaves the series out.
	Flows   *Flows
	Logger  *slog.Logger
	Version string
	// Timeout bounds the database read of one scrape (5s).
	Timeout time.Duration
	// QueueLimit is the most queues given series of their own; 0 gives
	// the totals only.
	QueueLimit int
}

// Handler returns the /metrics handler.
func Handler(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newQueueCollector(cfg),
	)
	if cfg.Outbox != nil {
		reg.MustRegister(&outboxCollector{cfg: cfg, rejects: prometheus.NewDesc("rowq_outbox_rejects",
			"Rows of the transactional outbox that were not valid jobs, kept in rowq_outbox_rejects (GET /outbox/rejects).", nil, nil)})
	}
	if cfg.WorkerHosts != nil {
		reg.MustRegister(newWorkerHostCollector(cfg))
	}
	if cfg.Flows != nil {
		reg.MustRegister(cfg.Flows.collectors()...)
	}
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rowq_build_info", Help: "Always 1; the version label says which rowq serves.",
		ConstLabels: prometheus.Labels{"version": cfg.Version},
	})
	build.Set(1)
	reg.MustRegister(build)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogErrors{cfg.Logger}})
}

// slogErrors passes promhttp's errors to the logger.
type slogErrors struct{ log *slog.Logger }

func (l slogErrors) Println(v ...any) { l.log.Warn("serve metrics", "err", v) }

// queueMetric is one series per queue, read off store.QueueStats, and
// its total over every queue.
type queueMetric struct {
	desc, total *prometheus.Desc
	kind        prometheus.ValueType
	value       func(q *store.QueueStats) float64
}

type queueCollector struct {
	cfg                   Config
	metrics               []queueMetric
	up, queues, overLimit *prometheus.Desc
}

func newQueueCollector(cfg Config) *queueCollector {
	m := func(name, help string, kind prometheus.ValueType, value func(q *store.QueueStats) float64) queueMetric {
		return queueMetric{
			desc:  prometheus.NewDesc("rowq_queue_"+name, help, []string{"queue"}, nil),
			total: prometheus.NewDesc("rowq_queues_"+name, help+" Sum over every queue.", nil, nil),
			kind:  kind, value: value,
		}
	}
	counter, gauge := prometheus.CounterValue, prometheus.GaugeValue
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	return &queueCollector{
		cfg:    cfg,
		up:     prometheus.NewDesc("rowq_stats_up", "1 if this scrape read the queues' statistics from the database, else 0.", nil, nil),
		queues: prometheus.NewDesc("rowq_queues", "Queues in all.", nil, nil),
		overLimit: prometheus.NewDesc("rowq_queues_over_limit",
			"1 if there are more queues than --metrics-queue-limit, and the per-queue series (rowq_queue_…) are left out, else 0.", nil, nil),
		metrics: []queueMetric{
			m("pushes_total", "Jobs accepted into the queue.", counter, func(q *store.QueueStats) float64 { return float64(q.Pushes) }),
			m("pops_total", "Jobs grabbed for delivery, counting each attempt.", counter, func(q *store.QueueStats) float64 { return float64(q.Pops) }),
			m("successes_total", "Deliveries answered success.", counter, func(q *store.QueueStats) float64 { return float64(q.Successes) }),
			m("failures_total", "Deliveries that did not succeed, retried or not.", counter, func(q *store.QueueStats) float64 { return float64(q.Failures) }),
			m("permanent_failures_total", "Jobs moved to the failure log.", counter, func(q *store.QueueStats) float64 { return float64(q.PermanentFailures) }),
			m("completes_total", "Jobs finished: successes and permanent failures.", counter, func(q *store.QueueStats) float64 { return float64(q.Completes) }),
			m("cancels_total", "Jobs cancelled.", counter, func(q *store.QueueStats) float64 { return float64(q.Cancels) }),
			m("delivery_seconds_total", "Time spent in deliveries.", counter, func(q *store.QueueStats) float64 { return float64(q.ElapsedMs) / 1000 }),
			m("wait_seconds_total", "Time the jobs grabbed had waited since they were due (rate over pops_total's rate: the mean enqueue-to-delivery latency).", counter, func(q *store.QueueStats) float64 { return float64(q.WaitMs) / 1000 }),
			m("outstanding_jobs", "Jobs stored in the queue: waiting, deferred or grabbed.", gauge, func(q *store.QueueStats) float64 { return float64(q.Outstanding) }),
			m("busy_workers", "Deliveries in flight.", gauge, func(q *store.QueueStats) float64 { return float64(q.BusyWorkers) }),
			m("max_workers", "The queue's max_workers setting.", gauge, func(q *store.QueueStats) float64 { return float64(q.MaxWorkers) }),
			m("dispatching", "1 if a live node dispatches the queue, else 0.", gauge, func(q *store.QueueStats) float64 { return b(q.Active) }),
		},
	}
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.up
	ch <- c.queues
	ch <- c.overLimit
	for _, m := range c.metrics {
		ch <- m.desc
		ch <- m.total
	}
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	qs, err := c.cfg.Store.StatsGet(ctx, &store.StatsGetParams{Fresh: stats.Fresh})
	if err != nil {
		c.cfg.Logger.Warn("read queue statistics for metrics", "err", err)
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(c.queues, prometheus.GaugeValue, float64(len(qs)))
	over := len(qs) > c.cfg.QueueLimit
	overLimit := 0.0
	if over {
		overLimit = 1
	}
	ch <- prometheus.MustNewConstMetric(c.overLimit, prometheus.GaugeValue, overLimit)
	for _, m := range c.metrics {
		total := 0.0
		for name, q := range qs {
			v := m.value(q)
			total += v
			if !over {
				ch <- prometheus.MustNewConstMetric(m.desc, m.kind, v, name)
			}
		}
		ch <- prometheus.MustNewConstMetric(m.total, m.kind, total)
	}
}

// workerHostCollector reads, at each scrape, the worker hosts the queues'
// leaders slow down or hold back: series exist only for those hosts, so
// their number stays that of the hosts in trouble, not of every host seen.
type workerHostCollector struct {
	cfg           Config
	rate, breaker *prometheus.Desc
}

func newWorkerHostCollector(cfg Config) *workerHostCollector {
	labels := []string{"queue", "host"}
	return &workerHostCollector{
		cfg: cfg,
		rate: prometheus.NewDesc("rowq_worker_host_rate",
			"Dispatches per second a worker host (host:port) gets since it answered 429 or 503; absent when not slowed.", labels, nil),
		breaker: prometheus.NewDesc("rowq_worker_host_breaker_state",
			"A worker host's circuit breaker: 0 closed, 1 open, 2 half-open; absent when closed and not slowed.", labels, nil),
	}
}

func (c *workerHostCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.rate
	ch <- c.breaker
}

func (c *workerHostCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	hosts, err := c.cfg.WorkerHosts.WorkerHostsList(ctx, "")
	if err != nil {
		c.cfg.Logger.Warn("read worker hosts for metrics", "err", err)
		return
	}
	states := map[string]float64{store.BreakerClosed: 0, store.BreakerOpen: 1, store.BreakerHalfOpen: 2}
	for _, h := range hosts {
		if h.Rate != nil {
			ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, *h.Rate, h.Queue, h.Host)
		}
		ch <- prometheus.MustNewConstMetric(c.breaker, prometheus.GaugeValue, states[h.Breaker], h.Queue, h.Host)
	}
}

// outboxCollector reads the number of the outbox's rejects at each
// scrape: one COUNT of a table that holds only rows gone wrong.
type outboxCollector struct {
	cfg     Config
	rejects *prometheus.Desc
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.rejects }

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	n, err := c.cfg.Outbox.OutboxRejectsCount(ctx)
	if err != nil {
		c.cfg.Logger.Warn("count outbox rejects for metrics", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.rejects, prometheus.GaugeValue, float64(n))
}
