package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// A chain extract → transform → load in one request: transform waits for
// extract (index 0), load for transform; each runs once its parent has
// succeeded. A failed or cancelled parent cancels its dependents unless
// OnParentFailure says otherwise. load calls back when it ends.
func ExampleClient_PushJobs_dependencies() {
	c := client.New(rowqURL(), nil)
	ctx := context.Background()
	// Paused, so that the example sees the chain before it runs.
	if _, err := c.PutQueue(ctx, "etl", &rowqtype.QueueRequest{Paused: new(true)}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.PutRouting(ctx, "etl", "etl"); err != nil {
		log.Fatal(err)
	}
	step := func(name string, parent *int) *rowqtype.BatchJob {
		j := &rowqtype.BatchJob{Category: "etl", JobRequest: rowqtype.JobRequest{URL: "http://worker.internal/" + name}}
		if parent != nil {
			j.DependsOn = []rowqtype.JobRef{{Index: parent}}
		}
		return j
	}
	load := step("load", new(1))
	load.OnFinish = &rowqtype.BatchJob{Category: "etl", JobRequest: rowqtype.JobRequest{
		URL: "http://worker.internal/report", Payload: json.RawMessage(`{"channel":"#data"}`)}}
	jobs, err := c.PushJobs(ctx, []*rowqtype.BatchJob{step("extract", nil), step("transform", new(0)), load})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range jobs {
		fmt.Println(j.ID, j.URL, j.Blocked)
	}
	page, err := c.Blocked(ctx, "etl", nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range page.Jobs {
		fmt.Println(j.ID, j.Status, "waits for", j.Flow.WaitsFor)
	}
	job, err := c.Job(ctx, "etl", jobs[2].ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Flow.Callbacks)
	// Output:
	// 1 http://worker.internal/extract false
	// 2 http://worker.internal/transform true
	// 3 http://worker.internal/load true
	// 2 blocked waits for [1]
	// 3 blocked waits for [2]
	// [on_finish]
}

// A batch of two mails: its on_finish is enqueued once, when both have
// ended, with the batch's counts and meta in its payload; on_success only
// if both succeeded.
func ExampleClient_PushBatch() {
	c := client.New(rowqURL(), nil)
	ctx := context.Background()
	mail := func(to string) *rowqtype.BatchJob {
		return &rowqtype.BatchJob{Category: "welcome-mail", JobRequest: rowqtype.JobRequest{
			URL: "http://worker.internal/send", Payload: json.RawMessage(`{"to":"` + to + `"}`)}}
	}
	res, err := c.PushBatch(ctx, &rowqtype.BatchRequest{
		OnFinish: &rowqtype.BatchJob{Category: "welcome-mail", JobRequest: rowqtype.JobRequest{URL: "http://worker.internal/report"}},
		Meta:     json.RawMessage(`{"campaign":"december"}`),
	}, []*rowqtype.BatchJob{mail("ada@example.com"), mail("grace@example.com")})
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.Batch(ctx, res.BatchID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(b.ID, b.Total, b.Pending, b.FinishedAt == nil, string(b.Meta))
	page, err := c.Batches(ctx, &client.ListOptions{Limit: 10})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(page.Batches), "batch")
	// Output:
	// 1 2 2 true {"campaign":"december"}
	// 1 batch
}
