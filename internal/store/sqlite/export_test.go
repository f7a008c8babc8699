package sqlite

import (
	"os"

	"github.com/rowq/rowq/internal/store"
)

// SessionFile returns the lock file a node session holds its flock on.
func SessionFile(s store.NodeSession) *os.File { return s.(*nodeSession).f }
