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
// until SIGTERM; the jobs in flight then finish and are completed. A job
// whose payload is not JSON fails for good; any other error retries it by
// its policy.
func ExampleWorker() {
	c := client.New("http://127.0.0.1:8080", nil, client.WithToken("worker-token"))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
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
			return render(ctx, img.URL)
		},
	}
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// ExampleClient_Lease leases up to ten jobs of a pull queue, waiting up to
// 20 s for the first, and completes each.
func ExampleClient_Lease() {
	c := client.New("http://127.0.0.1:8080", nil)
	ctx := context.Background()
	jobs, err := c.Lease(ctx, "thumbnails", &rowqtype.LeaseRequest{Max: new(10), Wait: new(20.0), Lease: new(300.0)})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		status := "success"
		if err := render(ctx, string(j.Payload)); err != nil {
			status = "failure" // retried by the job's policy
		}
		if _, err := c.Complete(ctx, j.ID, &rowqtype.JobCompletion{LeaseToken: j.LeaseToken, Status: status}); err != nil {
			fmt.Println("job", j.ID, client.LeaseReason(err), err)
		}
	}
}

func render(context.Context, string) error { return nil }
