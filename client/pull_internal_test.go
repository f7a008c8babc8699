package client

import (
	"testing"

	"github.com/rowq/rowq/internal/validate"
)

// TestWorker_CompletionMessageFitsTheServer: the worker's cut of a
// completion's message is within what the server takes; above it, a long
// error's completion would be refused and its job wait out its lease.
func TestWorker_CompletionMessageFitsTheServer(t *testing.T) {
	if got, limit := maxCompletionMessage, validate.MaxLeaseMessage; got > limit {
		t.Errorf("maxCompletionMessage = %d, above the server's MaxLeaseMessage %d", got, limit)
	}
}
