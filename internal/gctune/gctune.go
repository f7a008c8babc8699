// Package gctune keeps the garbage collector from running needlessly often
// on a small heap. A busy rowq node's live heap is two or three megabytes
// while it allocates about 17 KB per job, so with Go's default (GOGC=100:
// collect when the heap has doubled) it collected about 40 times a second
// at 5,000 jobs/s, and the collector took a fifth of its CPU. Floor lets the
// heap grow to a fixed size before it is collected, and behaves as
// GOGC=100 once the live heap is half that size or more: the memory it
// costs is bounded by the floor, whatever the node holds.
//
// The floor is small on purpose. Measured on the 2-core benchmark machine
// (docs/benchmarks.md), 12 MiB cut the node's CPU per job by about a tenth
// and its collections by four fifths; 64 MiB collected less often still
// but saved nothing: a heap that no longer fits the processor's caches
// makes every allocation slower.
//
// It is the approach of a GOGC tuner: after each collection it sets the GC
// percentage so that the next collection comes when the heap reaches
// max(floor, 2 × live). A GOMEMLIMIT still applies (the runtime collects
// earlier when the limit is near); GOGC in the environment turns Floor off.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultFloor is the heap size below which a rowq node does not collect.
const DefaultFloor = 12 << 20 // see the package comment

var once sync.Once

// Floor keeps the heap goal at no less than floor bytes for the life of
// the process. Only the first call counts; it does nothing when GOGC is
// set in the environment (the operator's choice) or floor is 0.
func Floor(floor uint64) {
	if floor == 0 || os.Getenv("GOGC") != "" {
		return
	}
	once.Do(func() {
		t := &tuner{floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/gogc:percent"}}}
		t.adjust()
		t.watch()
	})
}

type tuner struct {
	floor  uint64
	sample []metrics.Sample // the live heap, the GC percentage
}

// watch calls adjust after every collection: a finalizer runs once its
// object has been found unreachable, that is after a collection, and
// arms itself again on a new object.
func (t *tuner) watch() {
	s := new(sentinel)
	runtime.SetFinalizer(s, func(*sentinel) {
		t.adjust()
		t.watch()
	})
}

// sentinel is a pointer-sized object: a finalizer on a zero-sized one
// may never run.
type sentinel struct{ _ *int }

// adjust sets the GC percentage for the live heap the last collection
// left: the goal live × (1 + percent/100) is then max(floor, 2 × live).
// Before the first collection the live heap reads 0, and the percentage
// is left alone.
func (t *tuner) adjust() {
	metrics.Read(t.sample)
	live := t.sample[0].Value.Uint64()
	if live == 0 {
		return
	}
	if p := percentFor(live, t.floor); uint64(p) != t.sample[1].Value.Uint64() {
		debug.SetGCPercent(p)
	}
}

// minLive is the smallest live heap percentFor believes: the runtime sets
// its goal from the heap it marked, which a reading of a few bytes would
// turn into a goal of gigabytes.
const minLive = 1 << 20

// percentFor is the GC percentage whose goal for live bytes of live heap
// is max(floor, 2 × live), rounded down to tens so that a live heap that
// wobbles does not reset it after every collection.
func percentFor(live, floor uint64) int {
	live = max(live, minLive)
	if 2*live >= floor {
		return 100
	}
	p := (floor - live) * 100 / live
	return int(p/10) * 10
}
