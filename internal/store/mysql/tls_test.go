package mysql_test

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/testcert"
)

// TestDSNFromURL_TLS: the URL's tls parameter goes to the driver as it is;
// tls-ca=FILE becomes a registered configuration that trusts that CA alone
// and checks the host name; tls-ca with a tls that does not verify, or a
// file holding no certificate, is refused.
func TestDSNFromURL_TLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "rowq test CA")
	caFile := ca.WriteFile(t, dir)
	parse := func(raw string) *gomysql.Config {
		t.Helper()
		dsn, err := mysql.DSNFromURL(raw)
		if err != nil {
			t.Fatalf("DSNFromURL(%s): %v", raw, err)
		}
		cfg, err := gomysql.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("ParseDSN(%s): %v", dsn, err)
		}
		return cfg
	}

	cfg := parse("mysql://u:p@db.example.com:3307/rowq?tls=skip-verify&timeout=2s")
	if cfg.TLS == nil || !cfg.TLS.InsecureSkipVerify || cfg.Timeout != 2*time.Second {
		t.Errorf("tls=skip-verify&timeout=2s: TLS %+v, timeout %v", cfg.TLS, cfg.Timeout)
	}
	for _, q := range []string{"tls-ca=" + url.QueryEscape(caFile), "tls=true&timeout=2s&tls-ca=" + url.QueryEscape(caFile)} {
		cfg = parse("mysql://u:p@db.example.com:3307/rowq?" + q)
		if cfg.TLS == nil || cfg.TLS.InsecureSkipVerify || !cfg.TLS.RootCAs.Equal(ca.Pool()) || cfg.TLS.ServerName != "db.example.com" {
			t.Errorf("%s: TLS %+v; want verification against the CA alone, of db.example.com", q, cfg.TLS)
		}
	}

	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("no certificate here"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"tls=skip-verify&tls-ca=" + url.QueryEscape(caFile),
		"tls=preferred&tls-ca=" + url.QueryEscape(caFile),
		"tls-ca=" + url.QueryEscape(filepath.Join(dir, "missing.pem")),
		"tls-ca=" + url.QueryEscape(notPEM),
	} {
		if _, err := mysql.DSNFromURL("mysql://u:p@db.example.com/rowq?" + q); err == nil || !strings.Contains(err.Error(), "tls-ca") {
			t.Errorf("%s: err = %v, want an error about tls-ca", q, err)
		}
	}
}

// TestOpenURL_TLSReachesTheDriver: with tls=true or tls-ca on the URL the
// store asks the server for TLS; the test MariaDB, which serves none (or
// not with this CA), is refused instead of used in clear.
func TestOpenURL_TLSReachesTheDriver(t *testing.T) {
	t.Parallel()
	caFile := testcert.NewCA(t, "rowq test CA").WriteFile(t, t.TempDir())
	base := dbtest.URL(t, "mysql")
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	for _, q := range []string{"tls=true", "tls-ca=" + url.QueryEscape(caFile)} {
		s, err := mysql.OpenURL(base + sep + q)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = s.Ping(ctx)
		cancel()
		s.Close()
		if err == nil || !(strings.Contains(err.Error(), "TLS") || strings.Contains(err.Error(), "certificate")) {
			t.Errorf("%s: Ping = %v, want a refusal over TLS", q, err)
		}
		t.Logf("%s: %v", q, err)
	}
}
