package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// A nightly job at 02:30 Berlin time; ticks missed while no rowq node ran
// are run once.
func ExampleClient_PutSchedule() {
	c := client.New("http://127.0.0.1:8080", nil)
	ctx := context.Background()
	s, err := c.PutSchedule(ctx, "nightly-report", &rowqtype.ScheduleRequest{
		Cron:     "30 2 * * *",
		Timezone: "Europe/Berlin",
		Category: "report",
		URL:      "http://worker:9000/report",
		Payload:  json.RawMessage(`{"kind":"daily"}`),
		Misfire:  "once",
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, next := range s.NextRuns {
		fmt.Println(next.Local, next.UTC)
	}
}

// The run history, newest first, one page at a time.
func ExampleClient_ScheduleRuns() {
	c := client.New("http://127.0.0.1:8080", nil)
	ctx := context.Background()
	opts := &client.ListOptions{Limit: 100}
	for {
		page, err := c.ScheduleRuns(ctx, "nightly-report", opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range page.Runs {
			if r.Skipped {
				fmt.Println(r.Tick, "skipped:", r.Reason)
			} else {
				fmt.Println(r.Tick, "job", *r.JobID, "by", r.Node)
			}
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
}
