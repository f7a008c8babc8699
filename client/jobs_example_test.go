package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// ExampleClient_PushJob enqueues one job; a field left nil takes the
// server's default, and new(v) fills one.
func ExampleClient_PushJob() {
	c := client.New(rowqURL(), nil)
	j, err := c.PushJob(context.Background(), "welcome-mail", &rowqtype.JobRequest{
		URL:        "http://worker.internal/send",
		Payload:    json.RawMessage(`{"to":"ada@example.com"}`),
		MaxRetries: new(3),
		RetryDelay: new(60),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(j.ID, j.QueueName)
	// Output: 1 mail
}

// ExampleClient_PutQueue creates a queue with 50 workers and the server's
// polling interval; Paused: new(true) would create it paused, nil keeps a
// paused queue paused.
func ExampleClient_PutQueue() {
	c := client.New(rowqURL(), nil)
	q, err := c.PutQueue(context.Background(), "newsletter", &rowqtype.QueueRequest{MaxWorkers: new(50)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(q.Name, q.MaxWorkers, q.PollingInterval, q.Paused)
	// Output: newsletter 50 200 false
}

// ExampleClient_PushJobs enqueues two jobs in one transaction; the second
// has a unique key, so enqueuing it again while it is pending returns it.
func ExampleClient_PushJobs() {
	c := client.New(rowqURL(), nil)
	invoice := &rowqtype.BatchJob{Category: "invoice", JobRequest: rowqtype.JobRequest{URL: "http://worker.internal/invoice",
		// Optional fields are pointers; new(v) fills one.
		UniqueKey: new("invoice-42"), Priority: new(10), MaxRetries: new(8), RetryDelay: new(5),
		RetryBackoff: new("exponential"), RetryDelayMax: new(600), RetryJitter: new(0.2)}}
	for range 2 {
		jobs, err := c.PushJobs(context.Background(), []*rowqtype.BatchJob{
			{Category: "welcome-mail", JobRequest: rowqtype.JobRequest{URL: "http://worker.internal/send",
				Payload: json.RawMessage(`{"to":"ada@example.com"}`)}},
			invoice,
		})
		if err != nil {
			log.Fatal(err)
		}
		for _, j := range jobs {
			// Existing is set only for a job with a unique key.
			fmt.Println(j.ID, j.QueueName, j.Existing != nil && *j.Existing)
		}
	}
	// Output:
	// 1 mail false
	// 2 mail false
	// 3 mail false
	// 2 mail true
}

// ExampleClient_RetryFailedJobs puts every failed job of a queue back.
func ExampleClient_RetryFailedJobs() {
	c := client.New(rowqURL(), nil)
	n, err := c.RetryFailedJobs(context.Background(), "mail", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried", n)
	// Output: retried 0
}
