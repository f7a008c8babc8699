package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/rowqtype"
)

// pageAll follows a listing's next_cursor with limit 2 and returns the
// items' keys and the number of pages.
func pageAll(t *testing.T, list func(opts *client.ListOptions) ([]string, string, error)) ([]string, int) {
	t.Helper()
	var keys []string
	opts := &client.ListOptions{Limit: 2}
	for pages := 1; pages <= 10; pages++ {
		got, next, err := list(opts)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, got...)
		if next == "" {
			return keys, pages
		}
		opts.Cursor = next
	}
	t.Fatalf("no last page after 10 pages: %v", keys)
	return nil, 0
}

// rowq's own listings page the way the Fireworq listings do: limit and
// an opaque cursor, next_cursor absent on the last page.
func TestClient_Paging(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			c, _ := startServer(t, dialect)
			ctx := t.Context()

			for _, name := range []string{"d", "b", "a", "c"} {
				if _, err := c.Acquire(ctx, name, "me", client.AcquireOptions{TTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
			}
			locks, pages := pageAll(t, func(o *client.ListOptions) ([]string, string, error) {
				p, err := c.Locks(ctx, o)
				if err != nil {
					return nil, "", err
				}
				var names []string
				for _, l := range p.Locks {
					names = append(names, l.Name)
				}
				return names, p.NextCursor, nil
			})
			if fmt.Sprint(locks) != "[a b c d]" || pages != 2 {
				t.Errorf("locks = %v in %d pages, want [a b c d] in 2", locks, pages)
			}

			if _, err := c.PutQueue(ctx, "q", &rowqtype.QueueRequest{Paused: new(true)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutRouting(ctx, "cat", "q"); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"s3", "s1", "s2"} {
				if _, err := c.PutSchedule(ctx, name, &rowqtype.ScheduleRequest{Cron: "@daily", Category: "cat", URL: "http://127.0.0.1:1/", Paused: true}); err != nil {
					t.Fatal(err)
				}
			}
			scheds, pages := pageAll(t, func(o *client.ListOptions) ([]string, string, error) {
				p, err := c.Schedules(ctx, o)
				if err != nil {
					return nil, "", err
				}
				var names []string
				for _, s := range p.Schedules {
					names = append(names, s.Name)
				}
				return names, p.NextCursor, nil
			})
			if fmt.Sprint(scheds) != "[s1 s2 s3]" || pages != 2 {
				t.Errorf("schedules = %v in %d pages, want [s1 s2 s3] in 2", scheds, pages)
			}

			var want []string
			for range 4 {
				run, err := c.TriggerSchedule(ctx, "s1")
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, fmt.Sprint(run.ID))
			}
			slices.Reverse(want) // newest first
			runs, pages := pageAll(t, func(o *client.ListOptions) ([]string, string, error) {
				p, err := c.ScheduleRuns(ctx, "s1", o)
				if err != nil {
					return nil, "", err
				}
				var ids []string
				for _, r := range p.Runs {
					ids = append(ids, fmt.Sprint(r.ID))
				}
				return ids, p.NextCursor, nil
			})
			if !slices.Equal(runs, want) || pages != 2 {
				t.Errorf("runs = %v in %d pages, want %v in 2", runs, pages, want)
			}

			// A cursor is good only for its own listing.
			first, err := c.Schedules(ctx, &client.ListOptions{Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, list := range []func(context.Context, *client.ListOptions) error{
				func(ctx context.Context, o *client.ListOptions) error { _, err := c.Locks(ctx, o); return err },
				func(ctx context.Context, o *client.ListOptions) error {
					_, err := c.ScheduleRuns(ctx, "s1", o)
					return err
				},
			} {
				var apiErr *client.Error
				err := list(ctx, &client.ListOptions{Cursor: first.NextCursor})
				if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
					t.Errorf("a schedules cursor elsewhere: err = %v, want a 400", err)
				}
			}
		})
	}
}
