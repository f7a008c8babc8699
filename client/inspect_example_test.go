package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/rowq/rowq/client"
)

// Walk every deferred job of a queue, a page at a time, oldest first.
func ExampleClient_ListJobs() {
	c := client.New("http://127.0.0.1:8080", nil)
	ctx := context.Background()
	opts := &client.ListOptions{Limit: 500, Order: "asc"}
	for {
		page, err := c.ListJobs(ctx, "mail", client.JobsDeferred, opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, j := range page.Jobs {
			fmt.Println(j.ID, j.NextTry, j.Category)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
}

// Read one queue's statistics.
func ExampleClient_QueueStats() {
	c := client.New("http://127.0.0.1:8080", nil)
	st, err := c.QueueStats(context.Background(), "mail")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d outstanding, %.1f pushes/s, %d of %d workers idle\n",
		st.OutstandingJobs, st.PushesPerSecond, st.IdleWorkers, st.TotalWorkers)
}
