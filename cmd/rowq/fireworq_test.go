package main_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/testworker"
)

// TestFireworqClientScript runs scripts/fireworq-client.sh, a client script
// written for Fireworq (curl and jq), unchanged against a rowq process
// configured with Fireworq's own environment variables, on every database.
func TestFireworqClientScript(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the Fireworq client script needs %s (scripts/test.sh installs it): %v", tool, err)
		}
	}
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			if body == "fail" {
				return 200, `{"status":"permanent-failure","message":"no such user"}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		dbURL := dbtest.URL(t, dialect)
		env := testEnv(dbURL, "FIREWORQ_QUEUE_DEFAULT=default", "FIREWORQ_QUEUE_DEFAULT_POLLING_INTERVAL=100")
		if dialect == "mysql" {
			// A Fireworq deployment names its database with a go-sql-driver DSN.
			dsn, err := mysql.DSNFromURL(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			env = append(env[1:], "FIREWORQ_MYSQL_DSN="+dsn) // drop ROWQ_DATABASE_URL
		}
		env = slicesWithout(env, "ROWQ_QUEUE_DEFAULT=")
		p := serve(t, t.TempDir(), env...)
		cmd := exec.Command("bash", "../../scripts/fireworq-client.sh")
		cmd.Env = append(baseEnv(), "FIREWORQ=http://"+p.addr, "WORKER="+w.URL)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "OK") {
			t.Fatalf("fireworq-client.sh: %v\n%s", err, out)
		}
	})
}

// slicesWithout returns env without the entry drop.
func slicesWithout(env []string, drop string) []string {
	var out []string
	for _, kv := range env {
		if kv != drop {
			out = append(out, kv)
		}
	}
	return out
}
