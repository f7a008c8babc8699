package server_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testcert"
	"github.com/rowq/rowq/internal/testworker"
	"github.com/rowq/rowq/rowqtype"
)

// tlsFiles are a node's certificate and key files, issued by ca, and the
// CA's own file.
type tlsFiles struct {
	ca                        *testcert.CA
	certFile, keyFile, cafile string
}

// newTLSFiles makes a CA and writes a certificate it signed for
// 127.0.0.1 into a fresh directory.
func newTLSFiles(t *testing.T) (*tlsFiles, *testcert.Cert) {
	t.Helper()
	dir := t.TempDir()
	f := &tlsFiles{ca: testcert.NewCA(t, "rowq test CA"), certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem")}
	f.cafile = f.ca.WriteFile(t, dir)
	cert := f.ca.Issue(t)
	cert.WriteFiles(t, f.certFile, f.keyFile)
	return f, cert
}

// tweak makes a node serve HTTPS with the files and trust their CA.
func (f *tlsFiles) tweak(c *config.Config) {
	c.TLSCert, c.TLSKey, c.CAFile = f.certFile, f.keyFile, f.cafile
}

// get sends GET /version through tr and returns the serial number of the
// certificate the server showed, the HTTP version, and whether the
// request went over a connection opened before.
func get(t *testing.T, tr *http.Transport, s *server.Server) (serial *big.Int, proto string, reused bool) {
	t.Helper()
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), "GET", "https://"+s.Addr()+"/version", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /version = %d, %v", resp.StatusCode, err)
	}
	return testcert.Served(resp.TLS), resp.Proto, reused
}

// TestTLS_ServesHTTPSToClientsTrustingTheCA serves the API over TLS: the Go
// client given the CA's file works, over HTTP/2; without it the handshake
// fails on the certificate, and a plain-HTTP request gets no answer of the
// API.
func TestTLS_ServesHTTPSToClientsTrustingTheCA(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		f, cert := newTLSFiles(t)
		s := startNode(t, dbtest.URL(t, dialect), f.tweak)

		hc, err := client.HTTPClient(f.cafile)
		if err != nil {
			t.Fatal(err)
		}
		c := client.New("https://"+s.Addr(), hc)
		if _, err := c.PutQueue(t.Context(), "q", &rowqtype.QueueRequest{MaxWorkers: new(3)}); err != nil {
			t.Fatalf("PutQueue over HTTPS with the CA: %v", err)
		}
		q, err := c.Queue(t.Context(), "q")
		if err != nil || q.MaxWorkers != 3 {
			t.Fatalf("Queue over HTTPS = %+v, %v; want max_workers 3", q, err)
		}
		serial, proto, _ := get(t, hc.Transport.(*http.Transport), s)
		if serial.Cmp(cert.Leaf.SerialNumber) != 0 || proto != "HTTP/2.0" {
			t.Errorf("served certificate %v over %s, want %v over HTTP/2.0", serial, proto, cert.Leaf.SerialNumber)
		}

		_, err = client.New("https://"+s.Addr(), nil).Queue(t.Context(), "q")
		var verr *tls.CertificateVerificationError
		if !errors.As(err, &verr) {
			t.Errorf("client without the CA: err = %v, want a certificate verification error", err)
		}
		_, err = client.New("http://"+s.Addr(), nil).Queue(t.Context(), "q")
		if err == nil {
			t.Errorf("plain HTTP to the HTTPS port answered the API")
		}
	})
}

// TestTLS_ReloadSwapsCertificateKeepingOpenConnections reloads the
// certificate as SIGHUP does: a connection open before keeps working (with
// the certificate it had), a new one gets the new certificate, and files
// that hold no valid pair leave the last good certificate in service.
func TestTLS_ReloadSwapsCertificateKeepingOpenConnections(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		f, first := newTLSFiles(t)
		s := startNode(t, dbtest.URL(t, dialect), f.tweak)
		transport := func() *http.Transport {
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: f.ca.Pool()}, ForceAttemptHTTP2: true}
			t.Cleanup(tr.CloseIdleConnections)
			return tr
		}
		open := transport()
		if serial, _, _ := get(t, open, s); serial.Cmp(first.Leaf.SerialNumber) != 0 {
			t.Fatalf("served %v, want the first certificate %v", serial, first.Leaf.SerialNumber)
		}

		second := f.ca.Issue(t)
		second.WriteFiles(t, f.certFile, f.keyFile)
		leaf, err := s.ReloadTLS()
		if err != nil || leaf.SerialNumber.Cmp(second.Leaf.SerialNumber) != 0 {
			t.Fatalf("ReloadTLS = %v, %v; want the second certificate", leaf, err)
		}
		serial, _, reused := get(t, open, s)
		if !reused || serial.Cmp(first.Leaf.SerialNumber) != 0 {
			t.Errorf("open connection after the reload: reused %v, certificate %v; want the same connection, first certificate", reused, serial)
		}
		if serial, _, _ := get(t, transport(), s); serial.Cmp(second.Leaf.SerialNumber) != 0 {
			t.Errorf("new connection after the reload got certificate %v, want the second %v", serial, second.Leaf.SerialNumber)
		}

		bad := []struct {
			name      string
			cert, key []byte
			wantInErr string
		}{
			{"garbage", []byte("not a certificate"), second.KeyPEM, "load TLS certificate"},
			{"key of another certificate", f.ca.Issue(t).CertPEM, second.KeyPEM, "private key does not match"},
		}
		for _, b := range bad {
			writeFile(t, f.certFile, b.cert)
			writeFile(t, f.keyFile, b.key)
			if _, err := s.ReloadTLS(); err == nil || !strings.Contains(err.Error(), b.wantInErr) {
				t.Errorf("%s: ReloadTLS = %v, want an error with %q", b.name, err, b.wantInErr)
			}
			if serial, _, _ := get(t, transport(), s); serial.Cmp(second.Leaf.SerialNumber) != 0 {
				t.Errorf("%s: new connection got %v, want the last good certificate %v", b.name, serial, second.Leaf.SerialNumber)
			}
		}
		if serial, _, reused := get(t, open, s); !reused || serial.Cmp(first.Leaf.SerialNumber) != 0 {
			t.Errorf("first connection at the end: reused %v, certificate %v", reused, serial)
		}
	})
}

// TestTLS_NodesNudgeEachOtherOverHTTPS: under TLS a node that does not lead
// a queue nudges its leader over HTTPS, trusting --ca-file, so a job
// enqueued there is delivered long before the leader's next look
// (polling_interval 60 s).
func TestTLS_NodesNudgeEachOtherOverHTTPS(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		f, _ := newTLSFiles(t)
		url := dbtest.URL(t, dialect)
		a := startNode(t, url, f.tweak)
		hc, err := client.HTTPClient(f.cafile)
		if err != nil {
			t.Fatal(err)
		}
		ca := client.New("https://"+a.Addr(), hc)
		if _, err := ca.PutQueue(t.Context(), "q", &rowqtype.QueueRequest{PollingInterval: new(60_000)}); err != nil {
			t.Fatal(err)
		}
		if _, err := ca.PutRouting(t.Context(), "cat", "q"); err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, 10*time.Second, "a leads q", func() bool {
			n, err := ca.QueueNode(t.Context(), "q")
			return err == nil && n.ID == a.NodeID()
		})
		b := startNode(t, url, f.tweak)
		cb := client.New("https://"+b.Addr(), hc)
		time.Sleep(500 * time.Millisecond) // the runner's first grab finds nothing and parks
		for i := range 3 {
			begin := time.Now()
			if _, err := cb.PushJob(t.Context(), "cat", &rowqtype.JobRequest{URL: w.URL, Payload: []byte(fmt.Sprintf(`"j%d"`, i))}); err != nil {
				t.Fatal(err)
			}
			testworker.WaitFor(t, 10*time.Second, "the job enqueued on b", func() bool { return w.Distinct() == i+1 })
			if took := time.Since(begin); took > 3*time.Second {
				t.Fatalf("job %d took %v to arrive, want well under the 60 s polling interval: was the leader nudged?", i, took)
			}
		}
	})
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
