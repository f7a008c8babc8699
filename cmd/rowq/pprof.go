//go:build pprof

// Built with -tags pprof, rowq serves net/http/pprof on ROWQ_PPROF_ADDR (for
// example 127.0.0.1:6060) beside whatever command it runs, so that a serving
// node can be profiled under load (scripts/profile-serve.sh). With
// ROWQ_BLOCK_PROFILE=1 it also records every time a goroutine blocks (on a
// channel, a select, a mutex), which /debug/pprof/block counts by stack.
// Release builds have no such listener.
package main

import (
	"log"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
)

func init() {
	if os.Getenv("ROWQ_BLOCK_PROFILE") == "1" {
		runtime.SetBlockProfileRate(1)
	}
	if addr := os.Getenv("ROWQ_PPROF_ADDR"); addr != "" {
		go func() { log.Print(http.ListenAndServe(addr, nil)) }()
	}
}
