package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/rowqtype"
)

// Exit codes of `rowq lock run` when the command did not run to its end.
const (
	exitLockHeld = 75 // EX_TEMPFAIL: the lock stayed taken; the command did not run
	exitLockLost = 70 // the lease was lost while the command ran; it was stopped
)

// exitError makes rowq exit with code, printing msg first unless empty.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

const lockUsage = `Usage:
  rowq lock run NAME --ttl 30s [--wait 10s] [--limit N] [--owner O] -- COMMAND [ARGS…]
      hold the lock while COMMAND runs; exit with its code
  rowq lock get NAME                       show the lock's holders
  rowq lock ls [--limit N] [--cursor C]    list held locks
  rowq lock release NAME --owner O --token T
      end a lease (as its holder, or as an operator clearing it)
Each takes --server and --json.`

// lockCmd runs `rowq lock SUBCOMMAND`.
func lockCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, lockUsage)
		return &exitError{code: 2}
	}
	switch args[0] {
	case "run":
		return lockRun(args[1:], stdout, stderr)
	case "get":
		return lockGet(args[1:], stdout, stderr)
	case "ls", "list":
		return lockList(args[1:], stdout, stderr)
	case "release":
		return lockRelease(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, lockUsage)
		return nil
	}
	return fmt.Errorf("lock: unknown subcommand %q\n%s", args[0], lockUsage)
}

// parseInterleaved parses flags that may come before or after the
// positional arguments (rowq lock get NAME --json) and returns the
// positional ones.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func lockRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lock run", stderr)
	r := remoteFlags(fs)
	ttl := fs.Duration("ttl", 30*time.Second, "lease time; renewed every third of it while the command runs")
	wait := fs.Duration("wait", 0, "how long to wait for the lock if it is taken (0: fail at once)")
	limit := fs.Int("limit", 1, "holders allowed at once: more than 1 makes a semaphore")
	owner := fs.String("owner", client.DefaultOwner(), "who holds the lock")
	killAfter := fs.Duration("kill-after", 10*time.Second, "if the lease is lost: SIGTERM the command, then SIGKILL after this")
	sep := slices.Index(args, "--")
	if sep < 0 {
		sep = len(args)
	}
	pos, err := parseInterleaved(fs, args[:sep])
	if err != nil {
		return err
	}
	command := args[min(sep+1, len(args)):]
	if len(pos) != 1 || len(command) == 0 {
		return fmt.Errorf("lock run: want NAME [flags] -- COMMAND [ARGS…], got %d name(s) and %d command word(s)", len(pos), len(command))
	}
	name := pos[0]

	// Before the command starts, a signal gives up the wait. Once it runs,
	// SIGTERM and SIGHUP are passed on to it and rowq exits when it does;
	// SIGINT is not passed on, as a terminal sends it to the command too
	// (a second SIGINT means "force quit" to many programs).
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu    sync.Mutex
		child *os.Process
	)
	go func() {
		for sig := range sigs {
			mu.Lock()
			p := child
			mu.Unlock()
			switch {
			case p == nil:
				cancel()
			case sig != os.Interrupt:
				p.Signal(sig)
			}
		}
	}()

	code, stopped := 0, false
	opt := client.AcquireOptions{TTL: *ttl, Wait: *wait, Limit: *limit}
	c, err := r.client()
	if err != nil {
		return err
	}
	err = c.Hold(ctx, name, *owner, opt, func(ctx context.Context, l *rowqtype.Lease) error {
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Env = append(os.Environ(),
			"ROWQ_LOCK_NAME="+l.Name, "ROWQ_LOCK_OWNER="+l.Owner, "ROWQ_LOCK_TOKEN="+strconv.FormatInt(l.Token, 10))
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
		if err := cmd.Start(); err != nil {
			// As shells answer: 127 not found, 126 found but not runnable.
			code = 126
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, iofs.ErrNotExist) {
				code = 127
			}
			fmt.Fprintln(stderr, "rowq: lock run:", err)
			return nil
		}
		mu.Lock()
		child = cmd.Process
		mu.Unlock()
		done := make(chan struct{})
		go func() {
			cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-ctx.Done():
			stopped = true
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(*killAfter):
				cmd.Process.Kill()
				<-done
			}
		}
		code = exitCode(cmd.ProcessState)
		return nil
	})
	var held *client.HeldError
	switch {
	case errors.Is(err, client.ErrLeaseLost):
		what := fmt.Sprintf("the command was stopped (exit %d)", code)
		if !stopped {
			what = fmt.Sprintf("the command had finished (exit %d) but may have run without it", code)
		}
		return &exitError{code: exitLockLost, msg: fmt.Sprintf(
			"lock %q lost: its lease expired or was taken before it could be renewed; %s", name, what)}
	case errors.As(err, &held):
		owners := make([]string, len(held.Holders))
		for i, h := range held.Holders {
			owners[i] = fmt.Sprintf("%s (until %s)", h.Owner, h.ExpiresAt.Format(time.RFC3339))
		}
		return &exitError{code: exitLockHeld, msg: fmt.Sprintf(
			"lock %q is held by %s; waited %v; the command did not run", name, strings.Join(owners, ", "), *wait)}
	case errors.Is(err, context.Canceled):
		return &exitError{code: 130, msg: fmt.Sprintf("lock %q: interrupted while waiting; the command did not run", name)}
	case err != nil:
		return err
	case code != 0:
		return &exitError{code: code}
	}
	return nil
}

// exitCode is a finished process's exit code, or 128 + the signal that
// killed it, as shells report it.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func lockGet(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lock get", stderr)
	r := remoteFlags(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("lock get: want NAME, got %d argument(s)", len(pos))
	}
	ctx, cancel := r.context()
	defer cancel()
	c, err := r.client()
	if err != nil {
		return err
	}
	h, err := c.Lock(ctx, pos[0])
	if err != nil {
		return err
	}
	return r.print(stdout, h, func(w io.Writer) { printHolders(w, []*rowqtype.Lock{h}) })
}

func lockList(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lock ls", stderr)
	r := remoteFlags(fs)
	opts := pageFlags(fs, "locks")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := needArgs(fs, 0, "no arguments"); err != nil {
		return err
	}
	ctx, cancel := r.context()
	defer cancel()
	c, err := r.client()
	if err != nil {
		return err
	}
	page, err := c.Locks(ctx, opts)
	if err != nil {
		return err
	}
	return r.print(stdout, page, func(w io.Writer) {
		printHolders(w, page.Locks)
		if page.NextCursor != "" {
			fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
		}
	})
}

func printHolders(w io.Writer, locks []*rowqtype.Lock) {
	fmt.Fprintln(w, "NAME\tOWNER\tTOKEN\tLIMIT\tACQUIRED\tEXPIRES")
	for _, l := range locks {
		if len(l.Holders) == 0 {
			fmt.Fprintf(w, "%s\t(free)\t\t\t\t\n", l.Name)
		}
		for _, h := range l.Holders {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\n", h.Name, h.Owner, h.Token, h.Limit,
				h.AcquiredAt.Format(time.RFC3339), h.ExpiresAt.Format(time.RFC3339))
		}
	}
}

func lockRelease(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lock release", stderr)
	r := remoteFlags(fs)
	owner := fs.String("owner", "", "owner of the lease (required)")
	token := fs.Int64("token", 0, "token of the lease (required)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("lock release: want NAME, got %d argument(s)", len(pos))
	}
	ctx, cancel := r.context()
	defer cancel()
	c, err := r.client()
	if err != nil {
		return err
	}
	l, err := c.Release(ctx, &rowqtype.Lease{Name: pos[0], Owner: *owner, Token: *token})
	if err != nil {
		return err
	}
	return r.print(stdout, l, func(w io.Writer) {
		printHolders(w, []*rowqtype.Lock{{Name: l.Name, Holders: []*rowqtype.Lease{l}}})
	})
}
