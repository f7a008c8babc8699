package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rowq/rowq/client"
)

// TestHTTPClient_BadCAFile: a CA file that is missing or holds no PEM
// certificate is an error naming the file, not a client that trusts
// nothing or everything. (internal/server's TLS tests run the client against HTTPS.)
func TestHTTPClient_BadCAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "missing.pem"), notPEM} {
		if _, err := client.HTTPClient(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("HTTPClient(%s) = %v, want an error naming the file", path, err)
		}
	}
	if _, err := client.HTTPClient(""); err != nil {
		t.Errorf("HTTPClient(\"\") = %v, want the system's authorities", err)
	}
}
