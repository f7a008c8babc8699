package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// TestFresh_StaleNodeHandsNothingOff: a node whose last heartbeat is older
// than the node TTL (it was frozen, or cut off) may have lost its queues:
// it hands no job off until a heartbeat succeeds again.
func TestFresh_StaleNodeHandsNothingOff(t *testing.T) {
	d := New(Config{Store: dbtest.Open(t, "sqlite"), Node: "n1", Handoff: true, NodeTTL: time.Second})
	t.Cleanup(func() { d.Stop(context.Background()) })
	d.sync(readAll([]*store.Queue{{Name: "q", MaxWorkers: 2, PollingInterval: 1000}}), 0)
	r := d.runners["q"]
	gen, _ := r.grabStart()
	r.grabbed(true, gen) // a short grab: no backlog, hand-off may start

	d.lastBeat.Store(time.Now().UnixNano())
	h := d.Reserve("q")
	if h == nil {
		t.Fatal("a fresh node with a free slot and no backlog refused the hand-off")
	}
	h.Release()

	d.lastBeat.Store(time.Now().Add(-2 * time.Second).UnixNano())
	if d.fresh() {
		t.Fatal("fresh() with a heartbeat older than the node TTL")
	}
	if h := d.Reserve("q"); h != nil {
		h.Release()
		t.Error("a node whose heartbeat is older than the node TTL took a hand-off")
	}
}
