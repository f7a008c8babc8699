// Package server assembles a rowq node: it opens and migrates the store,
// ensures the default queue, and runs the HTTP API, the dispatcher and the
// schedule loop until it is stopped.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/httpapi"
	"github.com/rowq/rowq/internal/lock"
	"github.com/rowq/rowq/internal/notify"
	"github.com/rowq/rowq/internal/schedule"
	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/backend"
)

// Version is rowq's version, set at build time with
// -ldflags "-X github.com/rowq/rowq/internal/server.Version=…".
var Version = "dev"

// Server is one rowq node.
type Server struct {
	cfg   config.Config
	log   *slog.Logger
	store store.Store
	api   *httpapi.API
	disp  *dispatch.Dispatcher
	stats *stats.Recorder
	locks *lock.Service
	sched *schedule.Scheduler
	http  *http.Server
	ln    net.Listener
	serve chan error
	// unused: connections without a request yet, closed at a stop.
	unused unused

	stopOnce sync.Once
	stopErr  error
}

// New opens the store and migrates it, retrying while the database is
// unreachable until ctx ends.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := backend.Open(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, st, log); err != nil {
		st.Close()
		return nil, err
	}
	if cfg.NodeID == "" {
		cfg.NodeID = newNodeID()
	}
	return &Server{cfg: cfg, log: log.With("node", cfg.NodeID), store: st}, nil
}

// Migrate applies the schema, retrying while the database is unavailable
// (store.ErrUnavailable: unreachable, restarting, or an SQLite file that is
// locked or not there yet) until ctx ends. Several nodes or `rowq migrate`
// runs may call it at once: the migrations serialise themselves.
func Migrate(ctx context.Context, st store.Store, log *slog.Logger) error {
	for wait := 500 * time.Millisecond; ; wait = min(2*wait, 10*time.Second) {
		err := st.Migrate(ctx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			return fmt.Errorf("migrate %s database: %w", st.Dialect(), err)
		}
		log.Warn("database unreachable; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func newNodeID() string {
	host, _ := os.Hostname()
	b := make([]byte, 3)
	rand.Read(b)
	return nodeID(host, os.Getpid(), hex.EncodeToString(b))
}

// nodeID joins host, pid and a random suffix, cutting the host short so
// that the id keeps within config.MaxNodeIDLen.
func nodeID(host string, pid int, suffix string) string {
	tail := "-" + strconv.Itoa(pid) + "-" + suffix
	if room := config.MaxNodeIDLen - len(tail); len(host) > room {
		host = host[:room]
	}
	return host + tail
}

// Store returns the node's store.
func (s *Server) Store() store.Store { return s.store }

// NodeID returns the node's id.
func (s *Server) NodeID() string { return s.cfg.NodeID }

// Addr returns the address the API listens on, once started.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start ensures the default queue, binds the API and starts the dispatcher
// and the schedule loop.
func (s *Server) Start(ctx context.Context) error {
	cfg := s.cfg
	defaults := store.Queue{PollingInterval: cfg.QueueDefaultPollingInterval, MaxWorkers: cfg.QueueDefaultMaxWorkers}
	if cfg.QueueDefault != "" {
		q := defaults
		q.Name = cfg.QueueDefault
		if _, err := s.store.QueueEnsure(ctx, &q); err != nil {
			return fmt.Errorf("create default queue %q: %w", q.Name, err)
		}
	}
	ln, err := net.Listen("tcp", cfg.Bind)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Bind, err)
	}
	s.ln = ln
	host := cfg.AdvertiseHost
	if host == "" {
		host = ln.Addr().String()
	}
	s.stats = stats.New(stats.Config{Store: s.store, Logger: s.log, Node: cfg.NodeID})
	s.stats.Start()
	s.disp = dispatch.New(dispatch.Config{
		Store:           s.store,
		Logger:          s.log,
		Node:            cfg.NodeID,
		Host:            host,
		Client:          workerClient(cfg),
		UserAgent:       cfg.DispatchUserAgent,
		RefreshInterval: cfg.ConfigRefreshInterval,
		NodeTTL:         cfg.NodeTTL,
		GrabLease:       cfg.GrabLease,
		RescueInterval:  cfg.RescueInterval,
		Stats:           s.stats,
		Handoff:         cfg.DispatchHandoff,
	})
	waker := notify.New(notify.Config{Local: s.disp, Leaders: s.store, Logger: s.log, Node: cfg.NodeID, LeaderTTL: cfg.ConfigRefreshInterval})
	s.locks = lock.New(lock.Config{Store: s.store, Logger: s.log})
	s.locks.Start(ctx)
	s.sched = schedule.New(schedule.Config{
		Store:        s.store,
		Logger:       s.log,
		Node:         cfg.NodeID,
		DefaultQueue: cfg.QueueDefault,
		Waker:        waker,
		MisfireGrace: cfg.ScheduleMisfireGrace,
	})
	s.api = httpapi.New(httpapi.Config{
		Store:         s.store,
		Logger:        s.log,
		Waker:         waker,
		DefaultQueue:  cfg.QueueDefault,
		QueueDefaults: defaults,
		MaxBodyBytes:  cfg.MaxBodyBytes,
		Version:       Version,
		Settings:      cfg.Settings(backend.Redact),
		Stats:         s.stats,
		RouteCacheTTL: cfg.ConfigRefreshInterval,
		Handoff:       s.disp,
		Locks:         s.locks,
		Scheduler:     s.sched,
	})
	s.http = &http.Server{Handler: s.api, ReadHeaderTimeout: 10 * time.Second, ConnState: s.unused.track}
	s.serve = make(chan error, 1)
	go func() { s.serve <- s.http.Serve(ln) }()
	if err := s.disp.Start(ctx); err != nil {
		s.log.Warn("first heartbeat failed; the dispatcher keeps trying", "err", err)
	}
	if err := s.sched.Start(ctx); err != nil {
		return fmt.Errorf("start scheduler: %w", err)
	}
	s.log.Info("rowq serving", "addr", ln.Addr().String(), "database", backend.Redact(cfg.DatabaseURL), "version", Version)
	return nil
}

// workerClient is the HTTP client that delivers jobs. Per-job timeouts
// come from each job's context.
func workerClient(cfg config.Config) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableKeepAlives = !cfg.DispatchKeepAlive
	t.MaxConnsPerHost = cfg.DispatchMaxConnsPerHost
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.IdleConnTimeout = cfg.DispatchIdleConnTimeout
	return &http.Client{Transport: t}
}

// Stop shuts the node down softly: the API stops accepting requests and
// finishes those in flight, the dispatcher stops taking jobs and lets
// deliveries finish until the shutdown timeout (or until hard is closed,
// e.g. by a second signal), then leaves its queues to other nodes. Stop is
// idempotent.
func (s *Server) Stop(hard <-chan struct{}) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(hard) })
	return s.stopErr
}

func (s *Server) stop(hard <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	go func() {
		select {
		case <-hard:
			cancel()
		case <-ctx.Done():
		}
	}()
	var errs []error
	if s.locks != nil {
		// End lock waits first: the HTTP server's shutdown waits for the
		// requests in flight, and a wait may last minutes.
		s.locks.Stop()
	}
	if s.http != nil {
		if err := s.unused.shutdown(ctx, s.http); err != nil {
			errs = append(errs, fmt.Errorf("stop HTTP server: %w", err))
		}
		if err := <-s.serve; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("serve HTTP: %w", err))
		}
		s.api.Close()
	}
	if s.sched != nil {
		s.sched.Stop()
	}
	if s.disp != nil {
		s.disp.Stop(ctx)
	}
	if s.stats != nil {
		// The last counts, with a budget of their own: ctx may be spent.
		bg, cancelStats := context.WithTimeout(context.Background(), 5*time.Second)
		s.stats.Stop(bg)
		cancelStats()
	}
	if err := s.store.Close(); err != nil {
		errs = append(errs, err)
	}
	s.log.Info("rowq stopped")
	return errors.Join(errs...)
}

// Run runs a node until ctx ends, then stops it; hard cuts the soft stop
// short.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, hard <-chan struct{}) error {
	s, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		s.store.Close()
		return err
	}
	select {
	case <-ctx.Done():
		s.log.Info("shutting down: finishing deliveries in flight", "timeout", cfg.ShutdownTimeout)
	case err := <-s.serve:
		s.serve <- err
		log.Error("HTTP server stopped", "err", err)
	}
	return s.Stop(hard)
}
