// Package backend opens the store named by a database URL, picking the
// dialect by the URL's scheme.
package backend

import (
	"fmt"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dburl"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/store/postgres"
	"github.com/rowq/rowq/internal/store/sqlite"
)

// Open opens the store for a database URL:
//
//	mysql://user:pass@host:3306/db?param=value   MariaDB 10.6+ (MySQL 8: not tested)
//	mysql://user:pass@h1:3306,h2:3306/db         the first ready host of the list (docs/ha.md)
//	postgres://user:pass@host:5432/db?sslmode=…  PostgreSQL 13+ (postgresql:// too)
//	postgres://user:pass@h1,h2/db?target_session_attrs=read-write
//	sqlite://path/to/file.db                     embedded SQLite (sqlite:///abs/path)
//
// It does not migrate; call Migrate on the result.
func Open(databaseURL string) (store.Store, error) {
	scheme, rest, ok := strings.Cut(databaseURL, "://")
	if !ok {
		return nil, fmt.Errorf("database URL %q: want scheme://…, with scheme mysql, postgres or sqlite", Redact(databaseURL))
	}
	switch scheme {
	case "mysql":
		return mysql.OpenURL(databaseURL)
	case "postgres", "postgresql":
		return postgres.Open(databaseURL)
	case "sqlite", "sqlite3":
		path, _, _ := strings.Cut(rest, "?")
		if path == "" {
			return nil, fmt.Errorf("database URL %q: sqlite needs a file path, as in sqlite://rowq.db", databaseURL)
		}
		return sqlite.Open(path)
	default:
		return nil, fmt.Errorf("database URL %q: unknown scheme %q, want mysql, postgres or sqlite", Redact(databaseURL), scheme)
	}
}

// Redact hides the password of a database URL or DSN for logs and /settings.
// A URL may name several hosts (mysql://u:p@h1:3306,h2:3306/db).
func Redact(s string) string {
	if r, ok := dburl.Redact(s); ok {
		return r
	}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			return u.String()
		}
		return s
	}
	if cfg, err := gomysql.ParseDSN(s); err == nil && cfg.Passwd != "" {
		cfg.Passwd = "xxxxx"
		return cfg.FormatDSN()
	}
	return s
}
