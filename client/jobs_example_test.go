package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/rowq/rowq/client"
)

// ExampleClient_PushJobs enqueues two jobs in one transaction; the second
// has a unique key, so enqueuing it again while it is pending returns it.
func ExampleClient_PushJobs() {
	c := client.New("http://127.0.0.1:8080", nil)
	jobs, err := c.PushJobs(context.Background(), []*client.BatchJob{
		{Category: "welcome-mail", NewJob: client.NewJob{URL: "http://worker.internal/send",
			Payload: json.RawMessage(`{"to":"ada@example.com"}`)}},
		{Category: "invoice", NewJob: client.NewJob{URL: "http://worker.internal/invoice",
			UniqueKey: "invoice-42", Priority: 10, MaxRetries: 8, RetryDelay: 5,
			RetryBackoff: "exponential", RetryDelayMax: 600, RetryJitter: 0.2}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		fmt.Println(j.ID, j.QueueName, j.Existing)
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
