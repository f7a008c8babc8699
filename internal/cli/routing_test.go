package cli

import (
	"strings"
	"testing"
)

// rowq routing's verbs: put, get, rm and ls.
func TestRoutingCommands(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	mustRun(t, srv, "queue", "put", "q")

	mustRun(t, srv, "routing", "put", "c", "q")
	if out := mustRun(t, srv, "routing", "get", "c"); !strings.Contains(out, "c ") || !strings.Contains(out, " q") {
		t.Errorf("routing get:\n%s", out)
	}
	mustRun(t, srv, "routing", "rm", "c")
	if out := mustRun(t, srv, "routing", "ls", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("routing ls after rm: %s", out)
	}
}
