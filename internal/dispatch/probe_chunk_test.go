package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

// A look over many queues goes out probeChunk names at a time, and the
// answers are gathered; an error of any chunk is the look's error.
func TestInChunks(t *testing.T) {
	names := make([]string, 2*probeChunk+500)
	for i := range names {
		names[i] = fmt.Sprintf("q%d", i)
	}
	var sizes []int
	got, err := inChunks(names, func(_ context.Context, chunk []string) ([]string, error) {
		sizes = append(sizes, len(chunk))
		return chunk[:1], nil // the first of each chunk is "due"
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{probeChunk, probeChunk, 500}; !slices.Equal(sizes, want) {
		t.Errorf("chunk sizes %v, want %v", sizes, want)
	}
	if want := []string{"q0", fmt.Sprintf("q%d", probeChunk), fmt.Sprintf("q%d", 2*probeChunk)}; !slices.Equal(got, want) {
		t.Errorf("gathered %v, want %v", got, want)
	}
	boom := errors.New("boom")
	calls := 0
	_, err = inChunks(names, func(context.Context, []string) ([]string, error) {
		calls++
		if calls == 2 {
			return nil, boom
		}
		return nil, nil
	})
	if !errors.Is(err, boom) || calls != 2 {
		t.Errorf("got %v after %d calls, want boom after 2", err, calls)
	}
}
