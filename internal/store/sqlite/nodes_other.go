//go:build !unix

package sqlite

import (
	"errors"
	"os"
)

// lockFile answers errors.ErrUnsupported: node sessions need flock, so off
// unix a node runs on its TTL alone.
func lockFile(string, bool) (*os.File, error) { return nil, errors.ErrUnsupported }
