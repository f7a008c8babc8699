// Package server assembles a rowq node: it opens and migrates the store,
// ensures the default queue, and runs the HTTP API, the dispatcher and the
// schedule loop until it is stopped.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
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

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/egress"
	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/httpapi"
	"github.com/rowq/rowq/internal/lock"
	"github.com/rowq/rowq/internal/metrics"
	"github.com/rowq/rowq/internal/notify"
	"github.com/rowq/rowq/internal/outbox"
	"github.com/rowq/rowq/internal/schedule"
	"github.com/rowq/rowq/internal/signing"
	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/backend"
	"github.com/rowq/rowq/internal/tracing"
	"github.com/rowq/rowq/internal/web"
)

// Version is rowq's version, set at build time with
// -ldflags "-X github.com/rowq/rowq/internal/server.Version=…".
var Version = "dev"

// Server is one rowq node.
type Server struct {
	cfg   config.Config
	log   *slog.Logger
	store store.Store
	ln    net.Listener
	api   *httpapi.API
	http  *httpService
	// cert is the API's TLS certificate, nil when it serves plain HTTP;
	// peers is then the client that nudges other nodes over HTTPS.
	cert  *certificate
	peers *http.Client
	// workerURLs decides where deliveries may go; signer signs them.
	workerURLs *egress.Policy
	signer     *signing.Signer
	// outbox moves the transactional outbox while this node holds its
	// lease.
	outbox *outbox.Mover
	// started holds the services Start started, in order; Stop stops
	// them in reverse.
	started []service

	stopOnce sync.Once
	stopErr  error
}

// service is the lifecycle every long-running part of a node shares.
// Stop is idempotent, and safe after a Start that failed.
type service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// New opens the store and migrates it, retrying while the database is
// unreachable until ctx ends.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Validate has checked the policy and the secrets.
	workerURLs, err := egress.Parse(cfg.WorkerURLAllow, cfg.WorkerDenyPrivate)
	if err != nil {
		return nil, fmt.Errorf("worker-url-allow: %w", err)
	}
	keys, err := signing.ParseSecrets(cfg.SigningSecret)
	if err != nil {
		return nil, fmt.Errorf("signing-secret: %w", err)
	}
	s := &Server{cfg: cfg, workerURLs: workerURLs, signer: signing.NewSigner(keys)}
	if cfg.TLSCert != "" {
		if s.cert, err = loadCertificate(cfg.TLSCert, cfg.TLSKey); err != nil {
			return nil, err
		}
		if s.peers, err = client.HTTPClient(cfg.CAFile); err != nil {
			return nil, fmt.Errorf("ca-file: %w", err)
		}
	}
	st, err := backend.Open(cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := Migrate(ctx, st, log); err != nil {
		st.Close()
		return nil, err
	}
	if s.cfg.NodeID == "" {
		s.cfg.NodeID = newNodeID()
	}
	s.log, s.store = log.With("node", s.cfg.NodeID), st
	if advice, err := st.Advise(ctx); err != nil {
		s.log.Warn("could not check the database's settings", "err", err)
	} else {
		for _, a := range advice {
			s.log.Warn(a)
		}
	}
	return s, nil
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

// MovesOutbox reports whether this node moves the outbox now (it is the
// live node with the lowest id).
func (s *Server) MovesOutbox() bool { return s.outbox != nil && s.outbox.Moving() }

// NodeID returns the node's id.
func (s *Server) NodeID() string { return s.cfg.NodeID }

// Routes returns the patterns of every route the node serves, such as
// "GET /queue/{name}", once started.
func (s *Server) Routes() []string { return s.api.Routes() }

// Addr returns the address the API listens on, once started.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Start ensures the default queue, reads the keys the nodes share, starts
// the token verifier and binds the API, then builds the node's other
// services and starts them in order: tracing, statistics and their
// history, the dispatcher, the schedule loop, enqueueing, the outbox's
// mover, the HTTP server and the lock service. If a step fails, the
// services already started are stopped, in reverse, and the error is
// returned.
func (s *Server) Start(ctx context.Context) error {
	if err := s.ensureDefaultQueue(ctx); err != nil {
		return err
	}
	keys, err := s.readKeys(ctx)
	if err != nil {
		return err
	}
	verifier := auth.New(auth.Config{Tokens: s.store, Logger: s.log, Mode: s.cfg.Auth, AdminToken: s.cfg.AdminToken, NodeKey: keys.node})
	if err := s.startAll(ctx, verifier); err != nil {
		return err
	}
	if err := s.listen(ctx, verifier); err != nil {
		return errors.Join(err, s.stopStarted(context.WithoutCancel(ctx)))
	}
	svcs, err := s.build(keys, verifier)
	if err != nil {
		s.ln.Close()
		return errors.Join(err, s.stopStarted(context.WithoutCancel(ctx)))
	}
	if err := s.startAll(ctx, svcs...); err != nil {
		s.ln.Close() // if the HTTP server did not start, nothing else closes it
		return err
	}
	authOn, _ := verifier.Enabled(ctx)
	s.log.Info("rowq serving", "addr", s.ln.Addr().String(), "tls", s.cert != nil, "database", backend.Redact(s.cfg.DatabaseURL), "version", Version,
		"auth", s.cfg.Auth, "tokens_needed", authOn)
	return nil
}

// queueDefaults are the settings of a queue made without its own: the
// default queue, and a queue put without them.
func (s *Server) queueDefaults() store.Queue {
	return store.Queue{PollingInterval: s.cfg.QueueDefaultPollingInterval, MaxWorkers: s.cfg.QueueDefaultMaxWorkers}
}

// ensureDefaultQueue creates the default queue if it is configured and
// not there yet.
func (s *Server) ensureDefaultQueue(ctx context.Context) error {
	if s.cfg.QueueDefault == "" {
		return nil
	}
	q := s.queueDefaults()
	q.Name = s.cfg.QueueDefault
	if _, err := s.store.QueueEnsure(ctx, &q); err != nil {
		return fmt.Errorf("create default queue %q: %w", q.Name, err)
	}
	return nil
}

// nodeKeys are the secrets the nodes of one database share, each made by
// the first node that needs it.
type nodeKeys struct {
	node    string // the nodes' nudges to each other
	session string // the dashboard's session cookies
	lease   string // the dispatcher's lease tokens
}

// readKeys reads the shared secrets, making those not there yet.
func (s *Server) readKeys(ctx context.Context) (nodeKeys, error) {
	var k nodeKeys
	var err error
	if k.node, err = s.store.SecretEnsure(ctx, auth.NodeKeySecret, auth.NewNodeKey()); err != nil {
		return k, fmt.Errorf("read the node key: %w", err)
	}
	if k.session, err = s.store.SecretEnsure(ctx, web.SessionKeySecret, auth.NewNodeKey()); err != nil {
		return k, fmt.Errorf("read the dashboard's session key: %w", err)
	}
	if k.lease, err = s.store.SecretEnsure(ctx, dispatch.LeaseKeySecret, auth.NewNodeKey()); err != nil {
		return k, fmt.Errorf("read the lease key: %w", err)
	}
	return k, nil
}

// listen binds the API's address, and keeps it (s.ln) unless serving there
// would expose the node without authentication (checkExposure).
func (s *Server) listen(ctx context.Context, v *auth.Verifier) error {
	ln, err := net.Listen("tcp", s.cfg.Bind)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Bind, err)
	}
	if err := s.checkExposure(ctx, v, ln); err != nil {
		ln.Close()
		return err
	}
	s.ln = ln
	return nil
}

// build makes the node's services, each given the others it uses, and
// returns them in the order they start.
func (s *Server) build(keys nodeKeys, verifier *auth.Verifier) ([]service, error) {
	cfg := s.cfg
	st := stats.New(stats.Config{Store: s.store, Logger: s.log, Node: cfg.NodeID})
	// Validate has checked the endpoint; nil when there is none.
	tracer, err := tracing.New(tracing.Config{Endpoint: cfg.OTelEndpoint, Node: cfg.NodeID, Version: Version, Logger: s.log})
	if err != nil {
		return nil, err
	}
	peers := notify.New(s.nudges(keys.node))
	// Counts of the jobs' lifecycle: flows (the store tells, below) and
	// the history's prunes (the dispatcher tells).
	flows := metrics.NewFlows()
	disp := s.newDispatcher(keys.lease, st, peers, tracer, flows.Pruned)
	enq := enqueue.New(enqueue.Config{
		Store:         s.store,
		Logger:        s.log,
		Dispatcher:    disp,
		Stats:         st,
		DefaultQueue:  cfg.QueueDefault,
		RouteCacheTTL: cfg.ConfigRefreshInterval,
		Tracer:        tracer,
	})
	// Ending a job with a flow makes callbacks and released dependents
	// due, in any queue: the store tells after the commit.
	s.store.FlowWatch(func(d store.FlowDone) {
		flows.Add(d)
		enq.FlowDone(d.Queues)
	})
	sched := schedule.New(schedule.Config{
		Store:        s.store,
		Logger:       s.log,
		Node:         cfg.NodeID,
		Enqueue:      enq,
		MisfireGrace: cfg.ScheduleMisfireGrace,
	})
	s.outbox = outbox.New(outbox.Config{
		Store:      s.store,
		Enqueue:    enq,
		Logger:     s.log,
		Node:       cfg.NodeID,
		Nodes:      disp,
		WorkerURLs: s.workerURLs,
		IdlePoll:   cfg.OutboxIdlePoll,
		// The dispatcher reads the live nodes, which elect the mover, at
		// this interval too.
		CheckInterval: cfg.ConfigRefreshInterval,
	})
	locks := lock.New(lock.Config{Store: s.store, Logger: s.log})
	// The API reads statistics with this node's counts not yet written.
	view := st.ReadOwnWrites(s.store)
	// The dashboard's charts: the last hour of the queues' counters.
	history := stats.NewHistory(stats.HistoryConfig{Store: view, Logger: s.log})
	// The dashboard's actions are requests of the API, served for the
	// grant of the dashboard's session (s.api is set before it serves).
	act := func(r *http.Request, g *auth.Grant) (int, []byte) { return s.api.Act(r, g) }
	s.api = httpapi.New(httpapi.Config{
		Store:         view,
		Logger:        s.log,
		Enqueue:       enq,
		Dispatcher:    disp,
		Locks:         locks,
		Scheduler:     sched,
		Pages:         pages(view, s.log, verifier, []byte(keys.session), act, history, flows, cfg.MetricsQueueLimit),
		QueueDefaults: s.queueDefaults(),
		WorkerURLs:    s.workerURLs,
		MaxBodyBytes:  cfg.MaxBodyBytes,
		MaxResult:     cfg.MaxResultBytes,
		Version:       Version,
		Settings:      cfg.Settings(backend.Redact),
		Auth:          verifier,
		Peers:         peers,
	})
	var tlsConfig *tls.Config
	if s.cert != nil {
		tlsConfig = s.cert.config()
	}
	s.http = newHTTPService(s.api, s.ln, tlsConfig, s.log)
	// The lock service starts last so that it stops first: a stop ends
	// lock waits, which may last minutes, before the HTTP server waits
	// for the requests in flight. A lock request served before it starts
	// polls for releases made on other nodes.
	// The tracer stops after the dispatcher: the spans of the last
	// deliveries are sent.
	return []service{tracer, st, history, disp, sched, enq, s.outbox, s.http, pullEnder{disp}, locks}, nil
}

// newDispatcher makes the node's dispatcher, which advertises the
// configured host, or else the address the API listens on.
func (s *Server) newDispatcher(leaseKey string, st *stats.Recorder, peers *notify.Nudger, tracer *tracing.Tracer, pruned func(int64)) *dispatch.Dispatcher {
	cfg := s.cfg
	host := cfg.AdvertiseHost
	if host == "" {
		host = s.ln.Addr().String()
	}
	return dispatch.New(dispatch.Config{
		Store:           s.store,
		Logger:          s.log,
		Node:            cfg.NodeID,
		Host:            host,
		Client:          workerClient(cfg, s.workerURLs),
		UserAgent:       cfg.DispatchUserAgent,
		WorkerURLs:      s.workerURLs,
		Signer:          s.signer,
		LeaseKey:        []byte(leaseKey),
		RefreshInterval: cfg.ConfigRefreshInterval,
		NodeTTL:         cfg.NodeTTL,
		GrabLease:       cfg.GrabLease,
		RescueInterval:  cfg.RescueInterval,
		BreakerOpen:     cfg.BreakerOpen,
		Stats:           st,
		Handoff:         cfg.DispatchHandoff,
		Nudger:          peers,
		Tracer:          tracer,
		MaxResultBytes:  cfg.MaxResultBytes,
		Pruned:          pruned,
	})
}

// nudges configures the nudger: nudges carry the nodes' shared key (with
// authentication on, the wake endpoint takes no other but an admin token);
// under TLS, other nodes serve HTTPS too, and are reached through peers.
func (s *Server) nudges(key string) notify.Config {
	c := notify.Config{Leaders: s.store, Logger: s.log, Node: s.cfg.NodeID, LeaderTTL: s.cfg.ConfigRefreshInterval, Key: key}
	if s.cert != nil {
		c.Scheme, c.Client = "https", s.peers
	}
	return c
}

// ReloadTLS reads the TLS certificate and key files again, as rowq serve
// does on SIGHUP, and returns the certificate served from now on: new
// connections get it, and those open keep theirs. If the files do not hold
// a valid pair, the node keeps serving the certificate it had and the
// error says why. On a node that serves plain HTTP it returns an error.
func (s *Server) ReloadTLS() (*x509.Certificate, error) {
	if s.cert == nil {
		return nil, errors.New("reload TLS certificate: serving plain HTTP (no --tls-cert)")
	}
	cert, err := s.cert.reload()
	if err != nil {
		return nil, err
	}
	return cert.Leaf, nil
}

// checkExposure refuses to serve beyond this host without authentication:
// with --auth=auto, no token row and no admin token, an address that is
// not a loopback one would let whoever reaches it do anything. An
// explicit --auth=off serves anyway; --auth=on with no token yet only
// warns (every request gets 401 until a token exists).
func (s *Server) checkExposure(ctx context.Context, v *auth.Verifier, ln net.Listener) error {
	addr, _ := ln.Addr().(*net.TCPAddr)
	if s.cfg.Auth == auth.ModeOff || addr == nil || addr.IP.IsLoopback() {
		return nil
	}
	on, err := v.Enabled(ctx)
	if err != nil {
		return err
	}
	if !on {
		return fmt.Errorf("refusing to serve on %s, which other hosts may reach, without authentication: "+
			"create a token first (rowq token create NAME --scope admin, with the same --database-url), "+
			"set ROWQ_ADMIN_TOKEN or --admin-token-file, or pass --auth=off to serve without authentication", ln.Addr())
	}
	return nil
}

// pages are the routes served beside the JSON API: Prometheus metrics and
// the dashboard, which guards itself (its login).
func pages(st store.Store, log *slog.Logger, v *auth.Verifier, sessionKey []byte, act web.ActFunc, history web.History, flows *metrics.Flows, queueLimit int) []httpapi.Page {
	out := []httpapi.Page{{Pattern: "GET /metrics", Handler: metrics.Handler(metrics.Config{Store: st, Outbox: st, WorkerHosts: st, Flows: flows,
		Logger: log, Version: Version, QueueLimit: queueLimit})}}
	dash := web.Handler(web.Config{Store: st, Logger: log, Version: Version, CheckName: httpapi.CheckName,
		Auth: v, SessionKey: sessionKey, Act: act, History: history})
	for _, p := range web.Routes {
		out = append(out, httpapi.Page{Pattern: p, Handler: dash, GuardsItself: true})
	}
	return out
}

// workerClient is the HTTP client that delivers jobs. Per-job timeouts
// come from each job's context. Its dialer refuses the addresses the
// worker-URL policy refuses, checked on the address dialled, after name
// resolution. It goes through no proxy (HTTP_PROXY would make the proxy's
// address the one checked) and follows no redirect (a redirect would
// leave the allow list behind): a 3xx answer is the worker's answer.
func workerClient(cfg config.Config, urls *egress.Policy) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = urls.Guard(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.DisableKeepAlives = !cfg.DispatchKeepAlive
	t.MaxConnsPerHost = cfg.DispatchMaxConnsPerHost
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.IdleConnTimeout = cfg.DispatchIdleConnTimeout
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Stop shuts the node down softly: lock waits end, the API stops
// accepting requests and finishes those in flight, the pending enqueues are
// written, the dispatcher stops taking jobs and lets deliveries finish
// until the shutdown timeout (or until hard is closed, e.g. by a second
// signal), then leaves its queues to other nodes, and the last statistics
// are written. Stop is idempotent.
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
	err := s.stopStarted(ctx)
	err = errors.Join(err, s.store.Close())
	s.log.Info("rowq stopped")
	return err
}

// startAll starts the services in order. If one fails, it stops those it
// started, in reverse, within the shutdown timeout, and returns the error.
func (s *Server) startAll(ctx context.Context, svcs ...service) error {
	for _, svc := range svcs {
		if err := svc.Start(ctx); err != nil {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
			defer cancel()
			return errors.Join(fmt.Errorf("start %T: %w", svc, err), s.stopStarted(stopCtx))
		}
		s.started = append(s.started, svc)
	}
	return nil
}

// stopStarted stops the services Start started, in reverse order.
func (s *Server) stopStarted(ctx context.Context) error {
	var errs []error
	for i := len(s.started) - 1; i >= 0; i-- {
		if err := s.started[i].Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	s.started = nil
	return errors.Join(errs...)
}

// Run runs a node until ctx ends, then stops it; hard cuts the soft stop
// short. Each value received from reload (SIGHUP) reloads the TLS
// certificate.
func Run(ctx context.Context, cfg config.Config, log *slog.Logger, hard <-chan struct{}, reload <-chan os.Signal) error {
	s, err := New(ctx, cfg, log)
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		return errors.Join(err, s.store.Close())
	}
	for running := true; running; {
		select {
		case <-ctx.Done():
			s.log.Info("shutting down: finishing deliveries in flight", "timeout", cfg.ShutdownTimeout)
			running = false
		case err := <-s.http.serve:
			s.http.serve <- err
			log.Error("HTTP server stopped", "err", err)
			running = false
		case <-reload:
			if leaf, err := s.ReloadTLS(); err != nil {
				s.log.Error("TLS certificate not reloaded: still serving the previous one", "err", err)
			} else {
				s.log.Info("TLS certificate reloaded", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter)
			}
		}
	}
	return s.Stop(hard)
}

// pullEnder ends the dispatcher's lease requests when the node stops, just
// before the HTTP server waits for the requests in flight (it stops after
// it): a long poll would otherwise hold the stop for its wait.
type pullEnder struct{ d *dispatch.Dispatcher }

func (pullEnder) Start(context.Context) error { return nil }

func (p pullEnder) Stop(context.Context) error {
	p.d.EndPulls()
	return nil
}
