package client

import (
	"context"
	"net/http"

	"github.com/rowq/rowq/rowqtype"
)

// PutSchedule creates or replaces a schedule (PUT /schedule/{name}).
func (c *Client) PutSchedule(ctx context.Context, name string, s *rowqtype.ScheduleRequest) (*rowqtype.Schedule, error) {
	var out rowqtype.Schedule
	if err := c.Do(ctx, http.MethodPut, "/schedule/"+esc(name), nil, s, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Schedule returns one schedule (GET /schedule/{name}).
func (c *Client) Schedule(ctx context.Context, name string) (*rowqtype.Schedule, error) {
	var out rowqtype.Schedule
	if err := c.Do(ctx, http.MethodGet, "/schedule/"+esc(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Schedules returns a page of schedules by name (GET /schedules). opts
// may be nil; its Order is not used.
func (c *Client) Schedules(ctx context.Context, opts *ListOptions) (*rowqtype.SchedulePage, error) {
	var out rowqtype.SchedulePage
	if err := c.Do(ctx, http.MethodGet, "/schedules", opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSchedule removes a schedule and its history (DELETE
// /schedule/{name}) and returns it.
func (c *Client) DeleteSchedule(ctx context.Context, name string) (*rowqtype.Schedule, error) {
	return c.scheduleAction(ctx, http.MethodDelete, name, "")
}

// PauseSchedule stops a schedule's ticks (POST /schedule/{name}/pause).
func (c *Client) PauseSchedule(ctx context.Context, name string) (*rowqtype.Schedule, error) {
	return c.scheduleAction(ctx, http.MethodPost, name, "/pause")
}

// ResumeSchedule resumes a paused schedule from its next tick after now;
// ticks that passed while paused are not run (POST /schedule/{name}/resume).
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*rowqtype.Schedule, error) {
	return c.scheduleAction(ctx, http.MethodPost, name, "/resume")
}

func (c *Client) scheduleAction(ctx context.Context, method, name, suffix string) (*rowqtype.Schedule, error) {
	var out rowqtype.Schedule
	if err := c.Do(ctx, method, "/schedule/"+esc(name)+suffix, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TriggerSchedule enqueues one run now, outside the ticks (POST
// /schedule/{name}/trigger).
func (c *Client) TriggerSchedule(ctx context.Context, name string) (*rowqtype.ScheduleRun, error) {
	var out rowqtype.ScheduleRun
	if err := c.Do(ctx, http.MethodPost, "/schedule/"+esc(name)+"/trigger", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ScheduleRuns returns a page of a schedule's run history, newest first
// (GET /schedule/{name}/runs). opts may be nil; its Order is not used.
func (c *Client) ScheduleRuns(ctx context.Context, name string, opts *ListOptions) (*rowqtype.ScheduleRunPage, error) {
	var out rowqtype.ScheduleRunPage
	if err := c.Do(ctx, http.MethodGet, "/schedule/"+esc(name)+"/runs", opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
