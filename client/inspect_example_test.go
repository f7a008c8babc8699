package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// Walk every deferred job of a queue, a page at a time, oldest first.
func ExampleClient_ListJobs() {
	c := client.New(rowqURL(), nil)
	ctx := context.Background()
	for range 3 { // three jobs due in an hour
		if _, err := c.PushJob(ctx, "welcome-mail", &rowqtype.JobRequest{URL: "http://worker.internal/send", RunAfter: new(3600)}); err != nil {
			log.Fatal(err)
		}
	}
	opts := &client.ListOptions{Limit: 2, Order: "asc"}
	for {
		page, err := c.ListJobs(ctx, "mail", client.JobsDeferred, opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, j := range page.Jobs {
			fmt.Println(j.ID, j.Category) // and j.NextTry, when it is due
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	// Output:
	// 1 welcome-mail
	// 2 welcome-mail
	// 3 welcome-mail
}

// Read one queue's statistics.
func ExampleClient_QueueStats() {
	c := client.New(rowqURL(), nil)
	ctx := context.Background()
	if _, err := c.PushJob(ctx, "welcome-mail", &rowqtype.JobRequest{URL: "http://worker.internal/send"}); err != nil {
		log.Fatal(err)
	}
	st, err := c.QueueStats(ctx, "mail")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d pushed, %d outstanding\n", st.TotalPushes, st.OutstandingJobs)
	// Output: 1 pushed, 1 outstanding
}
