package client

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

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

// TestWorker_CompletionMessageMeasuredAsSent: a message is measured as
// the server will get it. Invalid bytes, which JSON sends as 3-byte
// replacement characters, do not take it past the limit; a long message
// is cut on a character's boundary.
func TestWorker_CompletionMessageMeasuredAsSent(t *testing.T) {
	for name, msg := range map[string]string{
		"2,000 invalid bytes":              strings.Repeat("\xff", 2000),
		"invalid bytes between characters": strings.Repeat("é\xfe", 1500),
		"5,000 two-byte characters":        strings.Repeat("é", 5000),
		"short":                            "boom",
	} {
		got := completionMessage(msg)
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		var sent string
		if err := json.Unmarshal(b, &sent); err != nil {
			t.Fatal(err)
		}
		if len(sent) > validate.MaxLeaseMessage || !utf8.ValidString(sent) {
			t.Errorf("%s: the server gets %d bytes (valid UTF-8: %v), want at most %d", name, len(sent), utf8.ValidString(sent), validate.MaxLeaseMessage)
		}
		if name == "short" && got != msg {
			t.Errorf("short message sent as %q, want it as it was", got)
		}
	}
}
