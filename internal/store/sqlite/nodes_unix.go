//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile opens path (creating it if create) and takes an exclusive flock
// on it without waiting: errLocked if another open file holds it,
// os.ErrNotExist if the file is missing and create is false. When the path
// was removed or replaced between the open and the lock, it opens again, so
// that the lock it returns is on the file the path names.
func lockFile(path string, create bool) (*os.File, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	for range 10 {
		f, err := os.OpenFile(path, flag, 0o644)
		if err != nil {
			return nil, err
		}
		if err := flock(f); err != nil {
			f.Close()
			return nil, err
		}
		same, err := namesFile(path, f)
		if err != nil || same {
			if err != nil {
				f.Close()
				return nil, err
			}
			return f, nil
		}
		f.Close() // its holder removed it: look again
	}
	return nil, fmt.Errorf("lock %s: replaced under us again and again", path)
}

// flock takes an exclusive flock on f without waiting.
func flock(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lockErr error
	err = raw.Control(func(fd uintptr) {
		for {
			lockErr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(lockErr, syscall.EINTR) {
				return
			}
		}
	})
	switch {
	case err != nil:
		return err
	case errors.Is(lockErr, syscall.EWOULDBLOCK):
		return errLocked
	case lockErr != nil:
		return fmt.Errorf("flock %s: %w", f.Name(), lockErr)
	}
	return nil
}
