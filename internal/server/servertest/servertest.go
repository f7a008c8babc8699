// Package servertest starts rowq nodes inside tests: a node on the given
// configuration, started, and stopped (softly) when the test ends.
package servertest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
)

// Start opens, migrates and starts a node with cfg and stops it when the
// test ends; a stop that fails fails the test. Its log is discarded.
func Start(t testing.TB, cfg config.Config) *server.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(nil); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return s
}
