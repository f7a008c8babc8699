package cli

import (
	"context"
	"io"
	"time"

	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/backend"
)

// migrateCmd is `rowq migrate`: it applies the database schema and exits.
func migrateCmd(args []string, _, stderr io.Writer) error {
	cfg, log, err := load("migrate", args, stderr)
	if err != nil {
		return err
	}
	st, err := backend.Open(cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := server.Migrate(ctx, st, log); err != nil {
		return err
	}
	log.Info("schema up to date", "dialect", st.Dialect(), "database", backend.Redact(cfg.DatabaseURL))
	return nil
}
