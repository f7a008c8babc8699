package client_test

import (
	"context"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/rowqtype"
)

// The Examples run against real rowq nodes, each on an embedded SQLite
// database of its own, so that their Output is checked, and each starts
// from an empty database (job ids from 1).
var exampleNodes struct {
	sync.Mutex
	nodes []*server.Server
	dirs  []string
}

// TestMain stops the nodes the Examples started once every test and
// Example has run.
func TestMain(m *testing.M) {
	code := m.Run()
	exampleNodes.Lock()
	defer exampleNodes.Unlock()
	for _, s := range exampleNodes.nodes {
		if err := s.Stop(nil); err != nil {
			log.Printf("stop an Example's node: %v", err)
			code = 1
		}
	}
	for _, d := range exampleNodes.dirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// rowqURL starts a rowq node for one Example and returns its address; in a
// program it is your rowq's, such as "http://127.0.0.1:8080". The node has
// what the Examples assume exists:
//   - queue "mail", paused so that the jobs the Examples push stay listed
//     (nothing listens at their worker URLs), with the categories
//     "welcome-mail", "invoice" and "report" routed to it;
//   - pull queue "thumbnails", with category "thumbnail" routed to it.
//
// Categories without a routing are refused (no default queue).
func rowqURL() string {
	dir, err := os.MkdirTemp("", "rowq-example-")
	if err != nil {
		log.Fatal(err)
	}
	cfg := config.Default()
	cfg.Bind = "127.0.0.1:0"
	cfg.DatabaseURL = "sqlite://" + filepath.Join(dir, "rowq.db")
	cfg.QueueDefault = ""
	cfg.ShutdownTimeout = time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := server.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		log.Fatal(err)
	}
	exampleNodes.Lock()
	exampleNodes.nodes = append(exampleNodes.nodes, s)
	exampleNodes.dirs = append(exampleNodes.dirs, dir)
	exampleNodes.Unlock()

	c := client.New(s.Addr(), nil)
	for name, q := range map[string]*rowqtype.QueueRequest{
		"mail":       {MaxWorkers: new(10), Paused: new(true)},
		"thumbnails": {Delivery: new("pull")},
	} {
		if _, err := c.PutQueue(ctx, name, q); err != nil {
			log.Fatal(err)
		}
	}
	for category, queue := range map[string]string{"welcome-mail": "mail", "invoice": "mail", "report": "mail", "thumbnail": "thumbnails"} {
		if _, err := c.PutRouting(ctx, category, queue); err != nil {
			log.Fatal(err)
		}
	}
	return s.Addr()
}
