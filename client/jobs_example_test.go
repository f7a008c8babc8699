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
	c := client.New("http://127.0.0.1:8080", nil)
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
}

// ExampleClient_PutQueue creates a queue with 50 workers and the server's
// polling interval; Paused: new(true) would create it paused, nil keeps a
// paused queue paused.
func ExampleClient_PutQueue() {
	c := client.New("http://127.0.0.1:8080", nil)
	q, err := c.PutQueue(context.Background(), "mail", &rowqtype.QueueRequest{MaxWorkers: new(50)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(q.Name, q.MaxWorkers, q.PollingInterval, q.Paused)
}

// ExampleClient_PushJobs enqueues two jobs in one transaction; the second
// has a unique key, so enqueuing it again while it is pending returns it.
func ExampleClient_PushJobs() {
	c := client.New("http://127.0.0.1:8080", nil)
	jobs, err := c.PushJobs(context.Background(), []*rowqtype.BatchJob{
		{Category: "welcome-mail", JobRequest: rowqtype.JobRequest{URL: "http://worker.internal/send",
			Payload: json.RawMessage(`{"to":"ada@example.com"}`)}},
		// Optional fields are pointers; new(v) fills one.
		{Category: "invoice", JobRequest: rowqtype.JobRequest{URL: "http://worker.internal/invoice",
			UniqueKey: new("invoice-42"), Priority: new(10), MaxRetries: new(8), RetryDelay: new(5),
			RetryBackoff: new("exponential"), RetryDelayMax: new(600), RetryJitter: new(0.2)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		// Existing is set only for a job with a unique key.
		fmt.Println(j.ID, j.QueueName, j.Existing != nil && *j.Existing)
	}
}

// ExampleClient_RetryFailedJobs puts every failed job of a queue back.
func ExampleClient_RetryFailedJobs() {
	c := client.New("http://127.0.0.1:8080", nil)
	n, err := c.RetryFailedJobs(context.Background(), "mail", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("retried", n)
}
