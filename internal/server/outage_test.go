package server_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// proxy is a TCP proxy in front of a database server that a test can cut
// (closing every connection and refusing new ones) and restore, to play a
// database restart or a network outage over real connections.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("restore proxy on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// viaProxy rewrites a database URL to go through a new proxy.
func viaProxy(t *testing.T, dbURL string) (string, *proxy) {
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	u.Host = p.addr
	return u.String(), p
}

// TestServer_DatabaseOutage: while the database is away the API answers 503
// and the dispatcher waits; when it returns, everything resumes by itself
// and no accepted job is lost.
func TestServer_DatabaseOutage(t *testing.T) {
	for _, dialect := range []string{"mysql", "postgres"} { // SQLite is a local file: it has no outage
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			w := testworker.New(t, nil)
			dbURL, p := viaProxy(t, dbtest.URL(t, dialect))
			s := startNode(t, dbURL, nil)
			setupQueue(t, s, "q", "cat", nil)
			push(t, s, "cat", map[string]any{"url": w.URL, "payload": "before"})
			// Accepted now, due during the outage.
			push(t, s, "cat", map[string]any{"url": w.URL, "payload": "deferred", "run_after": 1})
			testworker.WaitFor(t, 5*time.Second, "first delivery", func() bool { return w.Count("before") == 1 })

			p.cut()
			testworker.WaitFor(t, 15*time.Second, "503 while the database is away", func() bool {
				code, out := call(t, s, "POST", "/job/cat", map[string]any{"url": w.URL, "payload": "refused"})
				if code == http.StatusOK {
					t.Fatalf("job accepted while the database is away: %v", out)
				}
				msg, _ := out["error"].(string)
				return code == http.StatusServiceUnavailable && strings.Contains(msg, "database unavailable")
			})
			time.Sleep(2 * time.Second) // past the node TTL and the deferred job's due time

			p.restore()
			testworker.WaitFor(t, 30*time.Second, "API back", func() bool {
				code, _ := call(t, s, "GET", "/queue/q", nil)
				return code == http.StatusOK
			})
			push(t, s, "cat", map[string]any{"url": w.URL, "payload": "after"})
			testworker.WaitFor(t, 30*time.Second, "deliveries after the outage", func() bool {
				return w.Count("deferred") == 1 && w.Count("after") == 1
			})
			if n := w.Count("refused"); n != 0 {
				t.Errorf("a refused job was delivered %d times", n)
			}
			if n := w.Count("before"); n != 1 {
				t.Errorf("job delivered before the outage was delivered %d times", n)
			}
		})
	}
}
