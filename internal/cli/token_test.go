package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
)

// rowq runs the command with args and returns its exit code, stdout and
// stderr.
func rowq(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestToken_CreateListRevoke drives rowq token against each database with
// no server, then a server on the same database with the token.
func TestToken_CreateListRevoke(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		db := dbtest.URL(t, dialect)
		code, out, errb := rowq("token", "create", "ci", "--scope", "read,enqueue", "--queues", "billing-*", "--expires", "90d", "--database-url", db)
		if code != 0 {
			t.Fatalf("token create: exit %d: %s", code, errb)
		}
		if !regexp.MustCompile(`^rowq_[a-z2-7]{52}\n$`).MatchString(out) {
			t.Fatalf("token create printed %q on stdout, want the token alone", out)
		}
		tok := strings.TrimSpace(out)
		if !strings.Contains(errb, "shown once") {
			t.Errorf("token create said %q on stderr", errb)
		}
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"create", "ci", "--scope", "read"}, `a token named "ci" exists`},
			{[]string{"create", "x", "--scope", "write"}, `--scope: want read,enqueue,locks,work,admin, got "write"`},
			{[]string{"create", "x"}, "--scope: required"},
			{[]string{"create", "x", "--scope", "read", "--queues", "a/b"}, "--queues:"},
			{[]string{"create", "x", "--scope", "read", "--expires", "soon"}, "--expires: want a duration"},
			{[]string{"create", "bad name", "--scope", "read"}, "name:"},
			{[]string{"revoke", "nope"}, `no live token named "nope"`},
		} {
			code, out, errb := rowq(append(append([]string{"token"}, tc.args...), "--database-url", db)...)
			if code == 0 || out != "" || !strings.Contains(errb, tc.want) {
				t.Errorf("token %s: exit %d, stdout %q, stderr %q; want an error saying %q", strings.Join(tc.args, " "), code, out, errb, tc.want)
			}
		}
		code, out, _ = rowq("token", "create", "ops", "--scope", "admin", "--database-url", db)
		if code != 0 {
			t.Fatal("token create ops failed")
		}
		admin := strings.TrimSpace(out)

		_, ls, _ := rowq("token", "ls", "--database-url", db)
		for _, want := range []string{"NAME", "ci", "read,enqueue", "billing-*", "never", "live"} {
			if !strings.Contains(ls, want) {
				t.Errorf("token ls does not show %q:\n%s", want, ls)
			}
		}
		_, js, _ := rowq("token", "ls", "--json", "--database-url", db)
		var list []map[string]any
		if err := json.Unmarshal([]byte(js), &list); err != nil || len(list) != 2 || list[0]["name"] != "ci" || list[0]["expires_at"] == nil {
			t.Fatalf("token ls --json = %s (%v)", js, err)
		}
		for _, secret := range []string{tok, admin} {
			if strings.Contains(ls+js, secret) || strings.Contains(ls+js, strings.TrimPrefix(secret, "rowq_")) {
				t.Fatal("token ls shows a token")
			}
		}
		if strings.Contains(js, `"hash"`) {
			t.Errorf("token ls --json shows hashes: %s", js)
		}

		srv := startServerOn(t, db, nil)
		if code, _, errb := rowq("queue", "ls", "--server", srv); code == 0 || !strings.Contains(errb, "401") {
			t.Errorf("queue ls without a token: exit %d, %q; want a 401", code, errb)
		}
		if code, _, errb := rowq("queue", "put", "billing-a", "--server", srv, "--token", tok); code == 0 || !strings.Contains(errb, "lacks scope admin") {
			t.Errorf("queue put with a read,enqueue token: exit %d, %q; want a 403 naming the scope", code, errb)
		}
		if code, _, errb := rowq("queue", "put", "billing-a", "--server", srv, "--token", admin); code != 0 {
			t.Fatalf("queue put as ops: %s", errb)
		}
		if code, out, errb := rowq("queue", "ls", "--server", srv, "--token", tok); code != 0 || !strings.Contains(out, "billing-a") {
			t.Fatalf("queue ls with the token: exit %d: %s%s", code, out, errb)
		}
		if code, _, errb := rowq("token", "revoke", "ci", "--database-url", db); code != 0 {
			t.Fatalf("token revoke: %s", errb)
		}
		revoked := time.Now()
		for {
			code, _, errb := rowq("queue", "ls", "--server", srv, "--token", tok)
			if code != 0 && strings.Contains(errb, "401") {
				break
			}
			if time.Since(revoked) > 2*time.Second {
				t.Fatalf("the server still takes the token 2s after rowq token revoke")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, ls, _ := rowq("token", "ls", "--database-url", db); !strings.Contains(ls, "revoked") {
			t.Errorf("token ls after the revoke:\n%s", ls)
		}
	})
}

// TestToken_FromEnvironment: ROWQ_TOKEN is the default of --token, and
// ROWQ_DATABASE_URL of the token commands' --database-url.
func TestToken_FromEnvironment(t *testing.T) {
	db := dbtest.URL(t, "sqlite")
	t.Setenv("ROWQ_DATABASE_URL", db)
	code, out, errb := rowq("token", "create", "env", "--scope", "read")
	if code != 0 {
		t.Fatalf("token create with ROWQ_DATABASE_URL: %s", errb)
	}
	srv := startServerOn(t, db, nil)
	t.Setenv("ROWQ_TOKEN", strings.TrimSpace(out))
	if code, _, errb := rowq("queue", "ls", "--server", srv); code != 0 {
		t.Fatalf("queue ls with ROWQ_TOKEN: %s", errb)
	}
}
