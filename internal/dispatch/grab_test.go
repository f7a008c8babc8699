package dispatch

import "testing"

func TestPlanGrab_Sizes(t *testing.T) {
	const noThrottle = -1
	tests := []struct {
		name                          string
		free, have, maxWorkers, batch int
		backlog                       bool
		tokens                        int
		want                          grabPlan
	}{
		{name: "idle queue fills its free slots", free: 10, maxWorkers: 10, batch: 100, tokens: noThrottle,
			want: grabPlan{n: 10, start: 10}},
		{name: "no free slot and no backlog: no grab", free: 0, maxWorkers: 10, batch: 100, tokens: noThrottle,
			want: grabPlan{}},
		{name: "backlog reads ahead up to max_workers", free: 10, maxWorkers: 10, batch: 100, backlog: true, tokens: noThrottle,
			want: grabPlan{n: 20, start: 10, ahead: 10}},
		{name: "read-ahead bounded by the batch", free: 100, maxWorkers: 500, batch: 100, backlog: true, tokens: noThrottle,
			want: grabPlan{n: 100, start: 100, ahead: 100}},
		{name: "read-ahead full enough: no grab", free: 0, have: 6, maxWorkers: 10, batch: 100, backlog: true, tokens: noThrottle,
			want: grabPlan{}},
		{name: "read-ahead half gone: refill", free: 0, have: 5, maxWorkers: 10, batch: 100, backlog: true, tokens: noThrottle,
			want: grabPlan{n: 5, ahead: 10}},
		{name: "throttle bounds the grab and reads no ahead", free: 10, maxWorkers: 10, batch: 100, backlog: true, tokens: 3,
			want: grabPlan{n: 3, start: 3}},
		{name: "throttle with no token waits", free: 10, maxWorkers: 10, batch: 100, tokens: 0,
			want: grabPlan{throttled: true}},
		{name: "no free slot under a throttle is no wait", free: 0, maxWorkers: 10, batch: 100, tokens: 0,
			want: grabPlan{}},
		{name: "slots over max_workers after a lowering", free: -3, maxWorkers: 2, batch: 100, tokens: noThrottle,
			want: grabPlan{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			free := max(tc.free, 0)
			if got := planGrab(free, tc.have, tc.maxWorkers, tc.batch, tc.backlog, tc.tokens); got != tc.want {
				t.Errorf("planGrab(free %d, have %d, max %d, batch %d, backlog %t, tokens %d) = %+v, want %+v",
					free, tc.have, tc.maxWorkers, tc.batch, tc.backlog, tc.tokens, got, tc.want)
			}
		})
	}
}

func TestGrabPlan_SharingLeavesHalfTheSlotsToHandoffs(t *testing.T) {
	tests := []struct {
		name string
		p    grabPlan
		idle bool
		want grabPlan
	}{
		{name: "hand-off off: as planned", p: grabPlan{n: 10, start: 10}, want: grabPlan{n: 10, start: 10}},
		{name: "idle: half the slots", p: grabPlan{n: 10, start: 10}, idle: true, want: grabPlan{n: 5, start: 5}},
		{name: "idle with read-ahead: the ahead part stays", p: grabPlan{n: 20, start: 10, ahead: 10}, idle: true, want: grabPlan{n: 15, start: 5, ahead: 10}},
		{name: "idle, one slot: keeps it", p: grabPlan{n: 1, start: 1}, idle: true, want: grabPlan{n: 1, start: 1}},
		{name: "idle, no slot: nothing to share", p: grabPlan{n: 5, ahead: 10}, idle: true, want: grabPlan{n: 5, ahead: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.sharing(tc.idle); got != tc.want {
				t.Errorf("%+v.sharing(%t) = %+v, want %+v", tc.p, tc.idle, got, tc.want)
			}
		})
	}
}
