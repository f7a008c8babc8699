package server

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rowq/rowq/internal/config"
)

// TestNodeID_KeepsWithinTheLimit checks that a default node id fits the
// limit however long the host name (Kubernetes pod names reach 63).
func TestNodeID_KeepsWithinTheLimit(t *testing.T) {
	for _, host := range []string{"", "web1", strings.Repeat("h", 63), strings.Repeat("h", 253)} {
		id := nodeID(host, 4194304, "a1b2c3")
		if utf8.RuneCountInString(id) > config.MaxNodeIDLen {
			t.Errorf("host of %d: id %q has %d characters, want at most %d", len(host), id, len(id), config.MaxNodeIDLen)
		}
		if !strings.HasSuffix(id, "-4194304-a1b2c3") {
			t.Errorf("host of %d: id %q lost its pid or suffix", len(host), id)
		}
	}
	if got, want := nodeID("web1", 42, "a1b2c3"), "web1-42-a1b2c3"; got != want {
		t.Errorf("nodeID = %q, want %q", got, want)
	}
	c := config.Default()
	c.NodeID = strings.Repeat("n", config.MaxNodeIDLen+1)
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "node-id") {
		t.Errorf("Validate of a %d-character node id: %v, want an error naming node-id", len(c.NodeID), err)
	}
	c.NodeID = "web1 "
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "node-id") {
		t.Errorf("Validate of node id %q: %v, want an error naming node-id", c.NodeID, err)
	}
}
