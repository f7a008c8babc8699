package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestPercentFor(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{8 * mb, 64 * mb, 700},   // goal 8 + 56 = 64 MB
		{20 * mb, 64 * mb, 220},  // 20 × 3.2 = 64 MB
		{32 * mb, 64 * mb, 100},  // half the floor: GOGC=100's own goal
		{500 * mb, 64 * mb, 100}, // a big heap: as GOGC=100
		{1, 64 * mb, 6300},       // a nearly empty heap: as if 1 MB
		{3 * mb, 64 * mb, 2030},  // rounded down to tens
	} {
		if got := percentFor(c.live, c.floor); got != c.want {
			t.Errorf("percentFor(%d, %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

func gcPercent() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestFloorFollowsCollections: once Floor runs, every collection sets the
// percentage again for the live heap it found (here a test's few
// megabytes, so well above 100), whatever it was set to in between.
func TestFloorFollowsCollections(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(100)
	Floor(DefaultFloor)
	for round := 0; round < 3; round++ {
		debug.SetGCPercent(100)
		deadline := time.Now().Add(10 * time.Second)
		for gcPercent() <= 100 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the GC percentage stayed at 100 after collections", round)
			}
			runtime.GC() // the finalizer runs in its own goroutine after it
			time.Sleep(10 * time.Millisecond)
		}
	}
}
