package main_test

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServe_TokenBeforeExposing: rowq serve refuses 0.0.0.0 while no token
// exists; rowq token create (no server running) makes one; then serve
// starts there and every request but the open ones needs the token.
func TestServe_TokenBeforeExposing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	exposed := "ROWQ_BIND=0.0.0.0:" + port

	p := start(t, "rowq serve (no token)", dir, []string{exposed}, "serve")
	if code := p.wait(t, 30*time.Second); code == 0 {
		t.Fatal("serve on 0.0.0.0 with no token exited 0")
	}
	for _, want := range []string{"refusing to serve", "rowq token create", "--auth=off"} {
		if !strings.Contains(p.out.String(), want) {
			t.Errorf("serve's refusal does not say %q:\n%s", want, p.out)
		}
	}

	c := start(t, "rowq token create", dir, nil, "token", "create", "ops", "--scope", "admin")
	if code := c.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("token create: exit %d", code)
	}
	token, _, _ := strings.Cut(c.out.String(), "\n") // stdout and stderr share the buffer; the token comes first
	if !strings.HasPrefix(token, "rowq_") {
		t.Fatalf("token create printed %q", c.out)
	}

	s := start(t, "rowq serve", dir, []string{exposed}, "serve")
	s.addr = "127.0.0.1:" + port
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, _, err := s.do("GET", "/healthz", nil); err == nil && code == http.StatusOK {
			break
		}
		if s.exited() || time.Now().After(deadline) {
			t.Fatalf("serve with a token on 0.0.0.0 did not become healthy:\n%s", s.out)
		}
	}
	if code, _, _ := s.do("GET", "/queues", nil); code != http.StatusUnauthorized {
		t.Fatalf("GET /queues without a token: %d, want 401", code)
	}
	q := start(t, "rowq queue ls", dir, []string{"ROWQ_TOKEN=" + token, "ROWQ_SERVER=http://" + s.addr}, "queue", "ls")
	if code := q.wait(t, 30*time.Second); code != 0 || !strings.Contains(q.out.String(), "default") {
		t.Fatalf("queue ls with ROWQ_TOKEN: exit %d:\n%s", code, q.out)
	}
	if strings.Contains(s.out.String(), token) {
		t.Fatal("the server's log shows the token")
	}
}
