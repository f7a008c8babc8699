package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestClient_OutboxRejects pages through the rejects of three outbox rows
// whose categories route nowhere.
func TestClient_OutboxRejects(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			c, s := startServer(t, dialect)
			ctx := t.Context()
			if err := s.Store().OutboxInsert(ctx, []*store.OutboxRow{{Category: "a"}, {Category: "b"}, {Category: "c"}}); err != nil {
				t.Fatal(err)
			}
			testworker.WaitFor(t, 10*time.Second, "3 rejects", func() bool {
				n, err := s.Store().OutboxRejectsCount(ctx)
				return err == nil && n == 3
			})
			got, pages := pageAll(t, func(o *client.ListOptions) ([]string, string, error) {
				p, err := c.OutboxRejects(ctx, o)
				if err != nil {
					return nil, "", err
				}
				var keys []string
				for _, r := range p.Rejects {
					keys = append(keys, r.Category+"="+r.Reason)
				}
				return keys, p.NextCursor, nil
			})
			want := `[a=category: no routing for category "a" and no default queue b=category: no routing for category "b" and no default queue c=category: no routing for category "c" and no default queue]`
			if fmt.Sprint(got) != want || pages != 2 {
				t.Errorf("rejects = %v in %d pages, want %s in 2", got, pages, want)
			}
		})
	}
}
