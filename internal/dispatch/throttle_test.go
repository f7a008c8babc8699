package dispatch

import (
	"testing"
	"time"
)

func TestBucket_RateAndBurst(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBucket(5, 2, t0)
	if got := b.available(t0); got != 2 {
		t.Fatalf("a new bucket holds %d tokens, want the burst 2", got)
	}
	b.take(2)
	if got := b.available(t0); got != 0 {
		t.Fatalf("after taking the burst: %d tokens", got)
	}
	if got, want := b.untilNext(t0), 200*time.Millisecond; got != want {
		t.Fatalf("next token in %v, want %v", got, want)
	}
	if got := b.available(t0.Add(300 * time.Millisecond)); got != 1 {
		t.Fatalf("after 300ms at 5/s: %d tokens, want 1", got)
	}
	// An idle bucket fills up to the burst, not beyond.
	if got := b.available(t0.Add(time.Hour)); got != 2 {
		t.Fatalf("after an hour: %d tokens, want the burst 2", got)
	}
	if got := defaultBurst(0.5); got != 1 {
		t.Errorf("defaultBurst(0.5) = %d, want 1", got)
	}
	if got := defaultBurst(12.5); got != 13 {
		t.Errorf("defaultBurst(12.5) = %d, want 13", got)
	}
}
