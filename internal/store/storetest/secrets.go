package storetest

import (
	"sync"
	"testing"

	"github.com/rowq/rowq/internal/store"
)

// secretTests are the conformance tests of store.SecretStore.
var secretTests = []conformanceTest{
	{"Secret_EnsureKeepsTheFirst", testSecretEnsure},
}

func testSecretEnsure(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			v, err := s.SecretEnsure(ctx, "nudge", string(rune('a'+i)))
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for _, v := range got {
		if v != got[0] || v == "" {
			t.Fatalf("concurrent SecretEnsure returned %q: every caller must get the one stored value", got)
		}
	}
	if v := must(s.SecretEnsure(ctx, "nudge", "later"))(t); v != got[0] {
		t.Fatalf("SecretEnsure after the first = %q, want %q", v, got[0])
	}
	if v := must(s.SecretEnsure(ctx, "other", "x"))(t); v != "x" {
		t.Fatalf("SecretEnsure of another name = %q, want x", v)
	}
}
