package config

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestMySQLURLFromDSN: Fireworq's DSN becomes a URL with its parameters,
// so that tls=true (or a timeout) is not lost on the way.
func TestMySQLURLFromDSN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dsn, want string }{
		{"u:p@tcp(db:3306)/fireworq", "mysql://u:p@db:3306/fireworq"},
		{"u:p@tcp(db:3306)/fireworq?tls=true&timeout=5s", "mysql://u:p@db:3306/fireworq?tls=true&timeout=5s"},
		{"u:p/?w@tcp(db:3306)/fireworq?tls=skip-verify", "mysql://u:p%2F%3Fw@db:3306/fireworq?tls=skip-verify"},
	} {
		got, err := MySQLURLFromDSN(tc.dsn)
		if err != nil || got != tc.want {
			t.Errorf("MySQLURLFromDSN(%q) = %q, %v; want %q", tc.dsn, got, err, tc.want)
		}
	}
}

// TestLoad_TLS: the TLS settings come from flags or ROWQ_ names, and a
// certificate without its key (or the reverse) is refused naming both.
func TestLoad_TLS(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string, args ...string) (Config, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		return Load(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	}
	c, err := load(map[string]string{"ROWQ_TLS_CERT": "c.pem", "ROWQ_TLS_KEY": "k.pem", "ROWQ_CA_FILE": "ca.pem"})
	if err != nil || c.TLSCert != "c.pem" || c.TLSKey != "k.pem" || c.CAFile != "ca.pem" {
		t.Errorf("from the environment: %+v, %v", c, err)
	}
	c, err = load(map[string]string{"ROWQ_TLS_CERT": "c.pem"}, "--tls-key", "flag.pem")
	if err != nil || c.TLSKey != "flag.pem" {
		t.Errorf("key from a flag: %q, %v", c.TLSKey, err)
	}
	for _, args := range [][]string{{"--tls-cert", "c.pem"}, {"--tls-key", "k.pem"}} {
		if _, err := load(nil, args...); err == nil || !strings.Contains(err.Error(), "tls-cert, tls-key: give both files or neither") {
			t.Errorf("%v: err = %v, want both or neither", args, err)
		}
	}
}

// TestLoad_OTelEndpoint: the endpoint comes from the flag or
// ROWQ_OTEL_ENDPOINT (the flag first), is off by default, and one that
// is not an http(s) URL with a host is refused naming the flag.
func TestLoad_OTelEndpoint(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string, args ...string) (Config, error) { return loadWith(t, env, args...) }
	if c, err := load(nil); err != nil || c.OTelEndpoint != "" {
		t.Errorf("default: %q, %v; want off", c.OTelEndpoint, err)
	}
	env := map[string]string{"ROWQ_OTEL_ENDPOINT": "http://collector:4318"}
	if c, err := load(env); err != nil || c.OTelEndpoint != "http://collector:4318" {
		t.Errorf("from the environment: %q, %v", c.OTelEndpoint, err)
	}
	if c, err := load(env, "--otel-endpoint", "https://otlp.example/v1/traces"); err != nil || c.OTelEndpoint != "https://otlp.example/v1/traces" {
		t.Errorf("flag over environment: %q, %v", c.OTelEndpoint, err)
	}
	for _, bad := range []string{"collector:4318", "grpc://collector:4317", "http://", "http://u:secret@collector:4318"} {
		if _, err := load(nil, "--otel-endpoint", bad); err == nil || !strings.Contains(err.Error(), "otel-endpoint: ") {
			t.Errorf("--otel-endpoint %q: err = %v, want one naming otel-endpoint", bad, err)
		}
	}
}

func TestValidate_DatabaseURLHostLists(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want string // "" for valid
	}{
		{"mysql://u:secret@h1:3306,h2:3306,h3:3306/rowq", ""},
		{"postgres://u:secret@[::1]:5441,[::1]:5442/rowq?target_session_attrs=read-write", ""},
		{"sqlite://rowq.db", ""},
		{"mysql://u:secret@h1:3306,,h3/rowq", "database-url: empty host"},
		{"mysql://u:secret@h1:3306,h2:99999/rowq", `database-url: host "h2:99999"`},
		{"postgres://u:secret@::1/rowq", "database-url: host"},
		{"mysql://u:secret@h1/rowq%zz", "database-url:"},
		{"u:secret@tcp(h1)/rowq", "database-url: want"},
	} {
		c := Default()
		c.DatabaseURL = tc.url
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tc.url, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.url, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("%s: %v shows the password", tc.url, err)
		}
	}
}
