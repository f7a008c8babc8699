package cli

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// echoWorker is a worker for trying rowq out: it prints every job it gets
// and answers with the status given by --status.
func echoWorker(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("rowq echo-worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9000", "address to listen on")
	status := fs.String("status", "success", "status to answer: success, failure or permanent-failure")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *status {
	case "success", "failure", "permanent-failure":
	default:
		return fmt.Errorf("status: want success, failure or permanent-failure, got %q", *status)
	}
	answer := fmt.Sprintf(`{"status":%q,"message":"answered by rowq echo-worker"}`, *status)
	fmt.Fprintf(stderr, "rowq echo-worker listening on http://%s, answering %s\n", *listen, *status)
	srv := &http.Server{Addr: *listen, ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			fmt.Fprintf(stdout, "%s %s %s\n", r.Method, r.URL.Path, body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, answer)
		})}
	return srv.ListenAndServe()
}
