package main_test

// Process-level tests of rowq serve over TLS: the CLI with --ca-file, and
// SIGHUP reloading the certificate.

import (
	"crypto/tls"
	"io"
	"math/big"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/testcert"
	"github.com/rowq/rowq/internal/testworker"
)

// getTLS sends GET /healthz to addr through tr and returns the serial
// number of the certificate the server showed and whether the request
// went over a connection opened before.
func getTLS(tr *http.Transport, addr string) (serial *big.Int, reused bool, err error) {
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, err := http.NewRequest("GET", "https://"+addr+"/healthz", nil)
	if err != nil {
		return nil, false, err
	}
	resp, err := tr.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return testcert.Served(resp.TLS), reused, nil
}

func TestServe_TLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "rowq test CA")
	caFile := ca.WriteFile(t, dir)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := ca.Issue(t)
	first.WriteFiles(t, certFile, keyFile)
	addr := freeAddr(t)
	p := start(t, "rowq serve (TLS)", dir, testEnv("sqlite://"+filepath.Join(dir, "rowq.db"),
		"ROWQ_BIND="+addr, "ROWQ_TLS_CERT="+certFile, "ROWQ_TLS_KEY="+keyFile), "serve")
	p.addr = addr
	transport := func() *http.Transport {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, ForceAttemptHTTP2: true}
		t.Cleanup(tr.CloseIdleConnections)
		return tr
	}
	open := transport() // one keep-alive connection, opened before the reloads
	testworker.WaitFor(t, 30*time.Second, "rowq serving HTTPS", func() bool {
		serial, _, err := getTLS(open, addr)
		return err == nil && serial.Cmp(first.Leaf.SerialNumber) == 0
	})

	// The CLI: --ca-file or ROWQ_CA_FILE trusts the CA; without, the
	// certificate is refused.
	server := "https://" + addr
	if out, code := runRowq(t, nil, "", "queue", "put", "q", "--server", server, "--ca-file", caFile); code != 0 {
		t.Fatalf("rowq queue put --ca-file: exit %d: %s", code, out)
	}
	if out, code := runRowq(t, []string{"ROWQ_SERVER=" + server, "ROWQ_CA_FILE=" + caFile}, "", "queue", "ls"); code != 0 || !strings.Contains(out, "q") {
		t.Fatalf("rowq queue ls with ROWQ_CA_FILE: exit %d: %s", code, out)
	}
	if out, code := runRowq(t, nil, "", "queue", "ls", "--server", server); code == 0 || !strings.Contains(out, "certificate signed by unknown authority") {
		t.Fatalf("rowq queue ls without the CA: exit %d: %s; want a certificate error", code, out)
	}

	// SIGHUP: new connections get the new certificate, the open one
	// keeps working.
	second := ca.Issue(t)
	second.WriteFiles(t, certFile, keyFile)
	p.signal(t, syscall.SIGHUP)
	testworker.WaitFor(t, 10*time.Second, "the second certificate on a new connection", func() bool {
		serial, _, err := getTLS(transport(), addr)
		return err == nil && serial.Cmp(second.Leaf.SerialNumber) == 0
	})
	if serial, reused, err := getTLS(open, addr); err != nil || !reused || serial.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Errorf("open connection after SIGHUP: certificate %v, reused %v, err %v; want the same connection, still working", serial, reused, err)
	}

	// A bad file on SIGHUP is logged and the last good certificate stays.
	if err := os.WriteFile(certFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.signal(t, syscall.SIGHUP)
	testworker.WaitFor(t, 10*time.Second, "the failed reload logged", func() bool {
		return strings.Contains(p.out.String(), "TLS certificate not reloaded")
	})
	if serial, _, err := getTLS(transport(), addr); err != nil || serial.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Errorf("new connection after a bad reload: certificate %v, err %v; want the second", serial, err)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Errorf("exit code after SIGTERM = %d, want 0", code)
	}
}

// TestServe_TLSNeedsCertAndKey: a certificate without its key (or the
// reverse) stops rowq serve at start, naming both settings.
func TestServe_TLSNeedsCertAndKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, env := range []string{"ROWQ_TLS_CERT=" + filepath.Join(dir, "cert.pem"), "ROWQ_TLS_KEY=" + filepath.Join(dir, "key.pem")} {
		p := start(t, "rowq serve "+env, dir, testEnv("sqlite://"+filepath.Join(dir, "rowq.db"), "ROWQ_BIND="+freeAddr(t), env), "serve")
		if code := p.wait(t, 10*time.Second); code == 0 || !strings.Contains(p.out.String(), "tls-cert, tls-key: give both files or neither") {
			t.Errorf("%s: exit %d, output %q; want a start-up error naming tls-cert and tls-key", env, code, p.out)
		}
	}
}
