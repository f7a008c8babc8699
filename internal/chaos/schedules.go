package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// scheduleCheck runs a schedule that fires every second, to a queue of
// its own, and counts its runs per tick at the end.
type scheduleCheck struct {
	r    *run
	name string
}

func startScheduleCheck(ctx context.Context, r *run) (*scheduleCheck, error) {
	sc := &scheduleCheck{r: r, name: "chaos-" + r.id}
	api := r.c.pick().api
	queue, category := r.queue+"_tick", r.category+"-tick"
	if _, err := api.PutQueue(ctx, queue, &rowqtype.QueueRequest{MaxWorkers: new(5)}); err != nil {
		return nil, err
	}
	if _, err := api.PutRouting(ctx, category, queue); err != nil {
		return nil, err
	}
	_, err := api.PutSchedule(ctx, sc.name, &rowqtype.ScheduleRequest{
		Cron: "* * * * * *", Category: category, URL: r.w.url + "/tick",
		// Every missed tick is run late rather than skipped: a tick with
		// no run is lost.
		Misfire: "all", MaxCatchup: new(1000), Overlap: "allow",
	})
	if err != nil {
		return nil, fmt.Errorf("create schedule %s: %w", sc.name, err)
	}
	return sc, nil
}

// finish pauses the schedule, counts its runs per tick, from the first
// tick to the last, and how many of the killed nodes had fired one.
func (sc *scheduleCheck) finish(ctx context.Context, killed []string) *ScheduleResult {
	var api *client.Client
	for range 50 {
		if n := sc.r.c.pick(); n != nil {
			if _, err := n.api.PauseSchedule(ctx, sc.name); err == nil {
				api = n.api
				break
			}
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	if api == nil {
		return nil
	}
	perTick := map[int64]int{}
	fired := map[string]bool{} // the nodes that fired a tick
	res := &ScheduleResult{}
	opts := &client.ListOptions{Limit: 1000}
	for range 1000 {
		page, err := api.ScheduleRuns(ctx, sc.name, opts)
		if err != nil {
			sc.r.log.Warn("list schedule runs", "err", err)
			return nil
		}
		for _, run := range page.Runs {
			if run.Kind != "tick" {
				continue
			}
			perTick[run.Tick.Unix()]++
			fired[run.Node] = true
			res.Runs++
			if run.Skipped {
				res.Skipped++
			}
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
	}
	for _, id := range killed {
		if fired[id] {
			res.KilledFirers++
		}
	}
	if len(perTick) == 0 {
		return res
	}
	first, last := int64(1<<62), int64(0)
	for t, n := range perTick {
		first, last = min(first, t), max(last, t)
		res.Doubled += n - 1
	}
	res.Ticks = int(last - first + 1)
	res.Lost = res.Ticks - len(perTick)
	return res
}
