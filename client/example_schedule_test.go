package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// A nightly job at 02:30 Tokyo time; ticks missed while no rowq node ran
// are run once.
func ExampleClient_PutSchedule() {
	c := client.New(rowqURL(), nil)
	ctx := context.Background()
	s, err := c.PutSchedule(ctx, "nightly-report", &rowqtype.ScheduleRequest{
		Cron:     "30 2 * * *",
		Timezone: "Asia/Tokyo",
		Category: "report",
		URL:      "http://worker:9000/report",
		Payload:  json.RawMessage(`{"kind":"daily"}`),
		Misfire:  "once",
	})
	if err != nil {
		log.Fatal(err)
	}
	// The next fire times, each in the schedule's zone and in UTC (RFC 3339).
	local, err := time.Parse(time.RFC3339, s.NextRuns[0].Local)
	if err != nil {
		log.Fatal(err)
	}
	utc, err := time.Parse(time.RFC3339, s.NextRuns[0].UTC)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Name, "runs next at", local.Format("15:04 -07:00"), "=", utc.Format("15:04 MST"))
	// Output: nightly-report runs next at 02:30 +09:00 = 17:30 UTC
}

// The run history, newest first, one page at a time.
func ExampleClient_ScheduleRuns() {
	c := client.New(rowqURL(), nil)
	ctx := context.Background()
	if _, err := c.PutSchedule(ctx, "nightly-report", &rowqtype.ScheduleRequest{
		Cron: "30 2 * * *", Category: "report", URL: "http://worker:9000/report"}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.TriggerSchedule(ctx, "nightly-report"); err != nil { // a run now, off the cron
		log.Fatal(err)
	}
	opts := &client.ListOptions{Limit: 100}
	for {
		page, err := c.ScheduleRuns(ctx, "nightly-report", opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range page.Runs {
			if r.Skipped {
				fmt.Println(r.Kind, "skipped:", r.Reason)
			} else {
				fmt.Println(r.Kind, "made job", *r.JobID, "in queue", r.Queue)
			}
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	// Output: trigger made job 1 in queue mail
}
