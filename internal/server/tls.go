package server

import (
	"crypto/tls"
	"fmt"
	"sync/atomic"
)

// certificate is the node's TLS certificate and key, read from their files
// at start and again at each reload. A handshake takes the certificate
// read last, so a reload changes what new connections see and leaves the
// connections already open as they are.
type certificate struct {
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]
}

// loadCertificate reads the certificate and key files.
func loadCertificate(certFile, keyFile string) (*certificate, error) {
	c := &certificate{certFile: certFile, keyFile: keyFile}
	if _, err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the files again and, if they hold a certificate and its
// key, serves it from now on; otherwise it keeps the one it had.
func (c *certificate) reload() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("load TLS certificate %s and key %s: %w", c.certFile, c.keyFile, err)
	}
	c.current.Store(&cert)
	return &cert, nil
}

// config returns the server's TLS configuration. net/http adds HTTP/2 to
// its protocols.
func (c *certificate) config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.current.Load(), nil
		},
	}
}
