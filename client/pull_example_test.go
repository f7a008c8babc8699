package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// ExampleWorker works the jobs of pull queue "thumbnails", eight at once,
// until SIGTERM (here: until its first job is done); the jobs in flight
// then finish and are completed. A job whose payload is not JSON fails for
// good; any other error retries it by its policy.
func ExampleWorker() {
	c := client.New(rowqURL(), nil, client.WithToken("worker-token"))
	if _, err := c.PushJob(context.Background(), "thumbnail", &rowqtype.JobRequest{
		Payload: json.RawMessage(`{"URL":"https://example.com/cat.png"}`)}); err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, done := context.WithCancel(ctx) // the Example's own end
	w := &client.Worker{
		Client:      c,
		Queue:       "thumbnails",
		Concurrency: 8,
		Lease:       2 * time.Minute, // renewed every 40 s while a job runs
		Handler: func(ctx context.Context, j *rowqtype.LeasedJob) error {
			var img struct{ URL string }
			if err := json.Unmarshal(j.Payload, &img); err != nil {
				return client.Permanent(err)
			}
			defer done()
			return render(ctx, img.URL)
		},
	}
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
	// Output: rendered https://example.com/cat.png
}

// ExampleClient_Lease leases up to ten jobs of a pull queue, waiting up to
// 20 s for the first, and completes each.
func ExampleClient_Lease() {
	c := client.New(rowqURL(), nil)
	ctx := context.Background()
	if _, err := c.PushJob(ctx, "thumbnail", &rowqtype.JobRequest{Payload: json.RawMessage(`"dog.png"`)}); err != nil {
		log.Fatal(err)
	}
	jobs, err := c.Lease(ctx, "thumbnails", &rowqtype.LeaseRequest{Max: new(10), Wait: new(20.0), Lease: new(300.0)})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		status := "success"
		if err := render(ctx, string(j.Payload)); err != nil {
			status = "failure" // retried by the job's policy
		}
		done, err := c.Complete(ctx, j.ID, &rowqtype.JobCompletion{LeaseToken: j.LeaseToken, Status: status})
		if err != nil {
			fmt.Println("job", j.ID, client.LeaseReason(err), err)
			continue
		}
		fmt.Println("job", j.ID, done.Status)
	}
	// Output:
	// rendered "dog.png"
	// job 1 success
}

// render stands for a job's work.
func render(_ context.Context, image string) error {
	fmt.Println("rendered", image)
	return nil
}
