package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
)

// rowq lock ls pages with --limit and --cursor, and the table says where
// the next page starts.
func TestLockList_Paging(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	c := client.New(srv, nil)
	for _, name := range []string{"b", "a", "c"} {
		if _, err := c.Acquire(t.Context(), name, "me", client.AcquireOptions{TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	out := mustRun(t, srv, "lock", "ls", "--limit", "2")
	i := strings.Index(out, "more: --cursor ")
	if i < 0 || !strings.Contains(out, "\na ") || !strings.Contains(out, "\nb ") || strings.Contains(out, "\nc ") {
		t.Fatalf("lock ls --limit 2, first page:\n%s", out)
	}
	cursor := strings.Fields(out[i:])[2]
	out = mustRun(t, srv, "lock", "ls", "--limit", "2", "--cursor", cursor)
	if !strings.Contains(out, "\nc ") || strings.Contains(out, "\na ") || strings.Contains(out, "more:") {
		t.Fatalf("lock ls --cursor, last page:\n%s", out)
	}
	var page struct {
		Locks      []any  `json:"locks"`
		NextCursor string `json:"next_cursor"`
	}
	runJSON(t, srv, &page, "lock", "ls", "--limit", "3")
	if len(page.Locks) != 3 || page.NextCursor != "" {
		t.Fatalf("lock ls --limit 3 --json: %+v, want 3 locks and no next_cursor", page)
	}
	if code, _, errb := run(t, srv, "lock", "ls", "--cursor", "zz"); code == 0 || !strings.Contains(errb, "cursor:") {
		t.Fatalf("lock ls --cursor zz: exit %d, %s; want a failure naming cursor", code, errb)
	}
}
