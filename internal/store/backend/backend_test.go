package backend_test

import (
	"testing"

	"github.com/rowq/rowq/internal/store/backend"
)

func TestRedact_HostListsAndDSNs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"mysql://root:secret@h1:3311,h2:3312,h3:3313/rowq", "mysql://root:xxxxx@h1:3311,h2:3312,h3:3313/rowq"},
		{"mysql://root:secret@[::1]:3311,[::1]:3312/rowq", "mysql://root:xxxxx@[::1]:3311,[::1]:3312/rowq"},
		{"postgres://u:secret@h1,h2/rowq?target_session_attrs=read-write", "postgres://u:xxxxx@h1,h2/rowq?target_session_attrs=read-write"},
		{"mysql://root@h1/rowq", "mysql://root@h1/rowq"},
		{"sqlite://rowq.db", "sqlite://rowq.db"},
		{"sqlite:///var/lib/rowq.db", "sqlite:///var/lib/rowq.db"},
		{"root:secret@tcp(h1:3306)/rowq", "root:xxxxx@tcp(h1:3306)/rowq"},
	} {
		if got := backend.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
