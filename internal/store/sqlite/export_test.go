package sqlite

import (
	"database/sql"
	"os"

	"github.com/rowq/rowq/internal/store"
)

// SessionFile returns the lock file a node session holds its flock on.
func SessionFile(s store.NodeSession) *os.File { return s.(*nodeSession).f }

// Writer returns the store's one writer connection pool.
func Writer(s *Store) *sql.DB { return s.w }
