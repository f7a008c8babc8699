//go:build pprof

// Built with -tags pprof, rowq serves net/http/pprof on ROWQ_PPROF_ADDR (for
// example 127.0.0.1:6060) beside whatever command it runs, so that a serving
// node can be profiled under load (scripts/profile-serve.sh). Release builds
// have no such listener.
package main

import (
	"log"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if addr := os.Getenv("ROWQ_PPROF_ADDR"); addr != "" {
		go func() { log.Print(http.ListenAndServe(addr, nil)) }()
	}
}
