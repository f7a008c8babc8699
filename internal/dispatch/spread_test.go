package dispatch

import (
	"fmt"
	"testing"

	"github.com/rowq/rowq/internal/store"
)

func cluster(queues int, leads ...int) *store.Cluster {
	c := &store.Cluster{Queues: queues}
	for i, l := range leads {
		c.Nodes = append(c.Nodes, &store.Node{ID: fmt.Sprintf("n%d", i), Leads: l})
	}
	return c
}

func TestShare(t *testing.T) {
	for _, tc := range []struct {
		name         string
		c            *store.Cluster
		me           string
		claim, yield int
	}{
		{"alone claims every queue", cluster(300, 0), "n0", 300, 0},
		{"at its share", cluster(300, 100, 100, 100), "n0", 0, 0},
		{"a joining node claims its share", cluster(300, 100, 100, 100, 0), "n3", 75, 0},
		{"an old node yields to a joining one", cluster(300, 100, 100, 100, 0), "n0", 0, 25},
		{"yields are bounded per cycle", cluster(10_000, 10_000, 0), "n0", 0, maxYield},
		{"a dead node's queues are claimed up to hi", cluster(300, 100, 100), "n0", 50, 0},
		{"between lo and hi, claims when nobody is short", cluster(10, 3, 3, 2, 0), "n2", 0, 0},
		{"below lo claims up to hi", cluster(10, 3, 3, 3, 1), "n3", 2, 0},
		{"above lo yields one to a node below lo", cluster(10, 3, 3, 3, 1), "n0", 0, 1},
		{"at lo with one short elsewhere does nothing", cluster(10, 2, 3, 3, 1), "n0", 0, 0},
		{"between lo and hi, leaves free queues to a node below lo", cluster(10, 2, 3, 3, 0), "n0", 0, 0},
		{"below hi, nobody below lo", cluster(11, 2, 3, 3, 3), "n0", 1, 0},
		{"not live", cluster(10, 5), "other", 0, 0},
		{"no node", cluster(10), "n0", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim, yield := share(tc.c, tc.me)
			if claim != tc.claim || yield != tc.yield {
				t.Fatalf("share = claim %d, yield %d; want %d, %d", claim, yield, tc.claim, tc.yield)
			}
		})
	}
}

// TestShare_Converges plays cycles of every node in turn, claims taking
// free queues and yields freeing them, from lopsided starts: every node
// ends within [lo, hi], and then nothing moves.
func TestShare_Converges(t *testing.T) {
	for _, start := range [][]int{{300, 0, 0}, {100, 100, 100, 0}, {10, 0, 0, 0}, {7, 0}, {0, 0, 0, 0, 0}, {1, 0, 0}} {
		t.Run(fmt.Sprint(start), func(t *testing.T) {
			leads := append([]int(nil), start...)
			queues := 0
			for _, l := range leads {
				queues += l
			}
			queues += 3 // free queues too
			free := 3
			moves := 0
			for round := 0; ; round++ {
				if round > 100 {
					t.Fatalf("no convergence after 100 rounds: %v", leads)
				}
				moved := false
				for i := range leads {
					claim, yield := share(cluster(queues, leads...), fmt.Sprintf("n%d", i))
					take := min(claim, free)
					leads[i] += take - yield
					free += yield - take
					if take+yield > 0 {
						moved = true
						moves += take + yield
					}
				}
				if !moved {
					break
				}
			}
			lo, hi := queues/len(leads), (queues+len(leads)-1)/len(leads)
			for i, l := range leads {
				if l < lo || l > hi {
					t.Errorf("node %d leads %d, want %d..%d: %v", i, l, lo, hi, leads)
				}
			}
			if free != 0 {
				t.Errorf("%d queues left free: %v", free, leads)
			}
		})
	}
}
