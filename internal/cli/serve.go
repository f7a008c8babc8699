package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rowq/rowq/internal/gctune"
	"github.com/rowq/rowq/internal/server"
)

// serveCmd is `rowq serve`: it runs a node until SIGINT or SIGTERM; a
// second signal cuts the soft shutdown short. Under TLS, SIGHUP reloads
// the certificate.
func serveCmd(args []string, _, stderr io.Writer) error {
	cfg, log, err := load("serve", args, stderr)
	if err != nil {
		return err
	}
	gctune.Floor(gctune.DefaultFloor)
	reload := make(chan os.Signal, 1)
	if cfg.TLSCert != "" {
		signal.Notify(reload, syscall.SIGHUP)
		defer signal.Stop(reload)
	}
	// One channel for both signals: the first starts the soft stop, the
	// second cuts it short.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hard := make(chan struct{})
	go func() {
		<-sigs
		cancel()
		<-sigs
		log.Warn("second signal: stopping now")
		close(hard)
	}()
	return server.Run(ctx, cfg, log, hard, reload)
}
