package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// httpService serves a handler on a listener, with the lifecycle of the
// node's other services: Start begins serving, Stop shuts down softly
// (requests in flight finish until ctx ends).
type httpService struct {
	srv    *http.Server
	ln     net.Listener
	serve  chan error // Serve's return, once it returned
	unused unused     // connections without a request yet, closed at a stop
}

// newHTTPService serves h on ln: over TLS (HTTP/2 and HTTP/1.1) when
// tlsConfig is not nil, else plain HTTP/1.1. The server's own errors,
// such as failed TLS handshakes, are logged as warnings.
func newHTTPService(h http.Handler, ln net.Listener, tlsConfig *tls.Config, log *slog.Logger) *httpService {
	s := &httpService{ln: ln, serve: make(chan error, 1)}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ConnState: s.unused.track, TLSConfig: tlsConfig,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	return s
}

// Start serves in the background.
func (s *httpService) Start(context.Context) error {
	go func() {
		if s.srv.TLSConfig != nil {
			s.serve <- s.srv.ServeTLS(s.ln, "", "") // the certificate comes from TLSConfig
			return
		}
		s.serve <- s.srv.Serve(s.ln)
	}()
	return nil
}

// Stop stops accepting connections and waits for the requests in flight
// until ctx ends.
func (s *httpService) Stop(ctx context.Context) error {
	var errs []error
	if err := s.unused.shutdown(ctx, s.srv); err != nil {
		errs = append(errs, fmt.Errorf("stop HTTP server: %w", err))
	}
	if err := <-s.serve; err != nil && !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, fmt.Errorf("serve HTTP: %w", err))
	}
	return errors.Join(errs...)
}

// unused tracks the HTTP connections that have not begun a request yet
// (http.StateNew), such as those a client's pool dials ahead and then
// leaves. http.Server.Shutdown waits up to 5 s before it counts one as
// idle and closes it, and that wait would come out of the shutdown timeout
// that the deliveries in flight also need. A stop closes them itself once
// they have been unused for unusedGrace: a request whose headers have not
// arrived by then is not under way, and its client sees the connection
// close, as it would have after the listener closed.
type unused struct {
	mu    sync.Mutex
	conns map[net.Conn]time.Time // since when unused
}

const unusedGrace = time.Second

// track is the http.Server's ConnState hook.
func (u *unused) track(c net.Conn, st http.ConnState) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if st != http.StateNew {
		delete(u.conns, c)
		return
	}
	if u.conns == nil {
		u.conns = map[net.Conn]time.Time{}
	}
	u.conns[c] = time.Now()
}

// closeOld closes the connections unused since before now-unusedGrace.
func (u *unused) closeOld(now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for c, since := range u.conns {
		if now.Sub(since) >= unusedGrace {
			c.Close()
			delete(u.conns, c)
		}
	}
}

// shutdown runs srv.Shutdown(ctx), closing the connections left unused
// meanwhile.
func (u *unused) shutdown(ctx context.Context, srv *http.Server) error {
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case now := <-tick.C:
			u.closeOld(now)
		}
	}
}
