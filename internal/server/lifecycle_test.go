package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
)

// step is a service that records its start and stop in a shared log, and
// fails to start when told to.
type step struct {
	name string
	log  *[]string
	fail error
}

func (s *step) Start(context.Context) error {
	*s.log = append(*s.log, "start "+s.name)
	return s.fail
}

func (s *step) Stop(context.Context) error {
	*s.log = append(*s.log, "stop "+s.name)
	return nil
}

// TestStartAll_UnwindsWhenAStepFails starts a service, the HTTP server on
// a real listener, then a service that fails: the HTTP server and the
// first service are stopped, in reverse order, and the port no longer
// answers.
func TestStartAll_UnwindsWhenAStepFails(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.ShutdownTimeout = 5 * time.Second
	s := &Server{cfg: cfg, log: slog.New(slog.DiscardHandler)}
	var log []string
	web := newHTTPService(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { log = append(log, "request") }), ln, nil, s.log)
	boom := errors.New("boom")
	first, last := &step{name: "first", log: &log}, &step{name: "last", log: &log, fail: boom}

	err = s.startAll(t.Context(), first, web, last)
	if !errors.Is(err, boom) {
		t.Fatalf("startAll = %v, want the failing step's error", err)
	}
	if want := []string{"start first", "start last", "stop first"}; !slices.Equal(log, want) {
		t.Errorf("steps ran %q, want %q (the HTTP server stopped between them)", log, want)
	}
	if len(s.started) != 0 {
		t.Errorf("%d services still counted as started", len(s.started))
	}
	if conn, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		conn.Close()
		t.Error("the HTTP server's port still accepts connections after the failed start")
	}
	select {
	case err := <-web.serve:
		t.Errorf("Serve's end was not consumed by Stop: %v", err)
	default:
	}
}
