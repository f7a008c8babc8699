package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/backend"
)

const tokenUsage = `Usage: rowq token COMMAND [NAME] [flags]

Commands:
  create NAME --scope SCOPE[,SCOPE…] [--queues PATTERN[,PATTERN…]] [--expires DURATION]
                      make a token and print it, alone, on stdout (it is shown once)
  ls                  list tokens: name, scopes, queues, created, last used, expiry
  revoke NAME         stop a token on every node within about a second

Scopes: read (every GET, /metrics, the dashboard), enqueue (POST /job/…,
POST /jobs), locks (the lock endpoints), admin (everything).
--queues confines the token to the queues (and locks and schedules) whose
names match a glob, such as billing-*. --expires takes 90d, 12h or 30m.

The commands work on the database, with or without a running server: they
take --database-url (env ROWQ_DATABASE_URL; default as rowq serve's) and
--json (ls).
`

// tokenCmd is `rowq token`.
func tokenCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, tokenUsage)
		if len(args) == 0 {
			return fmt.Errorf("token: want a command")
		}
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	fs := newFlagSet("token "+sub, stderr)
	dbURL, err := config.DatabaseFlag(fs, config.FromEnv)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		scopes := fs.String("scope", "", "comma-separated scopes: read, enqueue, locks, work, admin (required)")
		queues := fs.String("queues", "", "comma-separated globs of the queues the token is confined to (default: every queue)")
		expires := fs.String("expires", "", "how long the token lives, such as 90d, 12h or 30m (default: until revoked)")
		if err := parseNamed(fs, args, 1); err != nil {
			return err
		}
		p, err := tokenParams(fs.Arg(0), *scopes, *queues, *expires)
		if err != nil {
			return err
		}
		return withStore(*dbURL, stderr, func(ctx context.Context, st store.Store) error {
			return createToken(ctx, st, p, stdout, stderr)
		})
	case "ls":
		asJSON := fs.Bool("json", false, "print the tokens as JSON, for scripts")
		if err := parseNamed(fs, args, 0); err != nil {
			return err
		}
		return withStore(*dbURL, stderr, func(ctx context.Context, st store.Store) error {
			ts, err := st.TokenList(ctx)
			if err != nil {
				return err
			}
			r := &remote{json: *asJSON}
			return r.print(stdout, tokensJSON(ts), func(w io.Writer) { tokenTable(w, ts) })
		})
	case "revoke":
		if err := parseNamed(fs, args, 1); err != nil {
			return err
		}
		name := fs.Arg(0)
		return withStore(*dbURL, stderr, func(ctx context.Context, st store.Store) error {
			_, err := st.TokenRevoke(ctx, name)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("token revoke: no live token named %q (rowq token ls lists them)", name)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(stderr, "revoked token %q: every node refuses it within about a second\n", name)
			return nil
		})
	default:
		fmt.Fprint(stderr, tokenUsage)
		return fmt.Errorf("token: unknown command %q", sub)
	}
}

// tokenParams validates the arguments of `rowq token create`; the hash is
// filled in by createToken.
func tokenParams(name, scopes, queues, expires string) (*store.TokenCreateParams, error) {
	if err := auth.CheckName(name); err != nil {
		return nil, fmt.Errorf("token create: %w", err)
	}
	if scopes == "" {
		return nil, errors.New("token create: --scope: required: read, enqueue, locks, work or admin (comma-separated)")
	}
	ss, err := auth.ParseScopes(scopes)
	if err != nil {
		return nil, fmt.Errorf("token create: --%w", err)
	}
	ps, err := auth.ParsePatterns(queues)
	if err != nil {
		return nil, fmt.Errorf("token create: --%w", err)
	}
	ttl, err := parseExpires(expires)
	if err != nil {
		return nil, fmt.Errorf("token create: --expires: %w", err)
	}
	p := &store.TokenCreateParams{Name: name, Queues: ps, TTL: ttl}
	for _, s := range ss {
		p.Scopes = append(p.Scopes, string(s))
	}
	return p, nil
}

// maxExpires bounds --expires.
const maxExpires = 10 * 366 * 24 * time.Hour

// parseExpires reads a duration as time.ParseDuration does, or a whole
// number of days (90d); "" is 0, never.
func parseExpires(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
		if n > int(maxExpires/(24*time.Hour)) {
			d = maxExpires + 1
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("want a duration such as 90d, 12h or 30m, got %q", s)
	case d <= 0 || d > maxExpires:
		return 0, fmt.Errorf("must be more than 0 and at most 3660d, got %q", s)
	}
	return d, nil
}

// createToken makes the token, stores its hash and prints it on stdout.
func createToken(ctx context.Context, st store.Store, p *store.TokenCreateParams, stdout, stderr io.Writer) error {
	token, hash := auth.NewToken()
	p.Hash = hash
	t, err := st.TokenCreate(ctx, p)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("token create: a token named %q exists (the names of revoked tokens stay taken): choose another name", p.Name)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, token)
	fmt.Fprintf(stderr, "created token %q (scopes %s; queues %s; expires %s); it is shown once: keep it now\n",
		t.Name, strings.Join(t.Scopes, ","), orAll(t.Queues), timeOr(t.ExpiresAt, "never"))
	return nil
}

// withStore opens and migrates the database, then runs fn.
func withStore(databaseURL string, stderr io.Writer, fn func(ctx context.Context, st store.Store) error) error {
	st, err := backend.Open(databaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := server.Migrate(ctx, st, log); err != nil {
		return err
	}
	return fn(ctx, st)
}

// tokenJSON is a token as `rowq token ls --json` prints it: never its
// hash.
type tokenJSON struct {
	Name       string     `json:"name"`
	Scopes     []string   `json:"scopes"`
	Queues     []string   `json:"queues"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	Live       bool       `json:"live"`
}

func tokensJSON(ts []*store.Token) []tokenJSON {
	out := make([]tokenJSON, len(ts))
	for i, t := range ts {
		out[i] = tokenJSON{Name: t.Name, Scopes: t.Scopes, Queues: t.Queues, CreatedAt: t.CreatedAt,
			LastUsedAt: nonZeroTime(t.LastUsedAt), ExpiresAt: nonZeroTime(t.ExpiresAt), RevokedAt: nonZeroTime(t.RevokedAt), Live: t.Live}
		if out[i].Queues == nil {
			out[i].Queues = []string{}
		}
	}
	return out
}

func tokenTable(w io.Writer, ts []*store.Token) {
	fmt.Fprintln(w, "NAME\tSCOPES\tQUEUES\tCREATED\tLAST USED\tEXPIRES\tSTATE")
	for _, t := range ts {
		state := "live"
		switch {
		case !t.RevokedAt.IsZero():
			state = "revoked " + t.RevokedAt.Format(time.RFC3339)
		case !t.Live:
			state = "expired"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, strings.Join(t.Scopes, ","), orAll(t.Queues),
			t.CreatedAt.Format(time.RFC3339), timeOr(t.LastUsedAt, "never"), timeOr(t.ExpiresAt, "never"), state)
	}
}

func orAll(patterns []string) string {
	if len(patterns) == 0 {
		return "*"
	}
	return strings.Join(patterns, ",")
}

func timeOr(t time.Time, zero string) string {
	if t.IsZero() {
		return zero
	}
	return t.Format(time.RFC3339)
}

func nonZeroTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
