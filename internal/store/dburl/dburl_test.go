package dburl_test

import (
	"slices"
	"testing"

	"github.com/rowq/rowq/internal/store/dburl"
)

func TestParse_HostLists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in  string
		hosts     []string
		user, db  string
		wantError bool
	}{
		{name: "one host", in: "mysql://root@127.0.0.1:3306/rowq", hosts: []string{"127.0.0.1:3306"}, user: "root", db: "/rowq"},
		{name: "default port", in: "mysql://root@db/rowq", hosts: []string{"db:3306"}, user: "root", db: "/rowq"},
		{name: "three hosts", in: "mysql://u:p@h1:3311,h2,h3:3313/rowq?tls=true", hosts: []string{"h1:3311", "h2:3306", "h3:3313"}, user: "u", db: "/rowq"},
		{name: "ipv6", in: "postgres://u@[::1]:5432,[fe80::1]/rowq", hosts: []string{"[::1]:5432", "[fe80::1]:3306"}, user: "u", db: "/rowq"},
		{name: "at sign in password", in: "mysql://u:p%40ss@h1,h2/rowq", hosts: []string{"h1:3306", "h2:3306"}, user: "u", db: "/rowq"},
		{name: "no user", in: "mysql://h1,h2/rowq", hosts: []string{"h1:3306", "h2:3306"}, db: "/rowq"},
		{name: "empty host", in: "mysql://u@h1,,h3/rowq", wantError: true},
		{name: "trailing comma", in: "mysql://u@h1,/rowq", wantError: true},
		{name: "bad port", in: "mysql://u@h1:99999/rowq", wantError: true},
		{name: "port only", in: "mysql://u@:3306/rowq", wantError: true},
		{name: "bare ipv6", in: "mysql://u@::1/rowq", wantError: true},
		{name: "no scheme", in: "h1,h2/rowq", wantError: true},
		{name: "space in a host", in: "mysql://u@h1,bad host/rowq", wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := dburl.Parse(tc.in, "3306")
			if tc.wantError {
				if err == nil {
					t.Fatalf("Parse(%q) = %v, want an error", tc.in, u.Hosts)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.in, err)
			}
			if !slices.Equal(u.Hosts, tc.hosts) {
				t.Errorf("Hosts = %q, want %q", u.Hosts, tc.hosts)
			}
			if got := u.User.Username(); got != tc.user {
				t.Errorf("user = %q, want %q", got, tc.user)
			}
			if u.Path != tc.db {
				t.Errorf("path = %q, want %q", u.Path, tc.db)
			}
			if got := u.String(); got != tc.in {
				t.Errorf("String() = %q, want the URL as given, %q", got, tc.in)
			}
		})
	}
}

func TestRedact_HostLists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"mysql://root:secret@h1:3311,h2:3312,h3:3313/rowq?tls=true", "mysql://root:xxxxx@h1:3311,h2:3312,h3:3313/rowq?tls=true"},
		{"postgres://rowq:s3cr%40t@[::1]:5441,[::1]:5442/rowq?target_session_attrs=read-write", "postgres://rowq:xxxxx@[::1]:5441,[::1]:5442/rowq?target_session_attrs=read-write"},
		{"mysql://root@h1,h2/rowq", "mysql://root@h1,h2/rowq"},
	} {
		got, ok := dburl.Redact(tc.in)
		if !ok || got != tc.want {
			t.Errorf("Redact(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}
