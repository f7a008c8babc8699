package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// A queue that keeps its finished jobs for a day: a pulled job completed
// with a result, read back with it, then the queue's history.
func ExampleClient_FinishedJobs() {
	c := client.New(rowqURL(), nil)
	ctx := context.Background()
	if _, err := c.PutQueue(ctx, "reports", &rowqtype.QueueRequest{Delivery: new("pull"), KeepFinished: new(86400)}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.PutRouting(ctx, "report", "reports"); err != nil {
		log.Fatal(err)
	}
	pushed, err := c.PushJob(ctx, "report", &rowqtype.JobRequest{Payload: json.RawMessage(`{"month":"2026-11"}`)})
	if err != nil {
		log.Fatal(err)
	}
	jobs, err := c.Lease(ctx, "reports", &rowqtype.LeaseRequest{Wait: new(20.0)})
	if err != nil || len(jobs) != 1 {
		log.Fatal(len(jobs), err)
	}
	if _, err := c.Complete(ctx, jobs[0].ID, &rowqtype.JobCompletion{LeaseToken: jobs[0].LeaseToken,
		Status: "success", Result: json.RawMessage(`{"pages":3}`)}); err != nil {
		log.Fatal(err)
	}
	f, err := c.FinishedJob(ctx, "reports", pushed.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Status, f.Attempts, string(f.Result))
	page, err := c.FinishedJobs(ctx, "reports", &client.FinishedOptions{Status: rowqtype.FinishedSucceeded})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.FinishedJobs), "succeeded")
	// Output:
	// succeeded 1 {"pages":3}
	// 1 succeeded
}
