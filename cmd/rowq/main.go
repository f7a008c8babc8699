// Command rowq is a job queue, scheduler and lock server that keeps its
// state in MySQL, MariaDB, PostgreSQL or SQLite. Run `rowq help`.
package main

import (
	"os"

	"github.com/rowq/rowq/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
