// Package dburl parses database URLs that name several hosts, as in
// mysql://user:pass@h1:3306,h2:3306/db or pgx's
// postgres://user:pass@h1:5432,h2:5432/db?target_session_attrs=read-write.
// net/url takes such a host list as one host when every host is a name or
// an IPv4 address, and refuses it when one is a bracketed IPv6 address; this
// package splits the list first and lets net/url parse the rest.
package dburl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// URL is a database URL with its host list split.
type URL struct {
	// URL is the URL with the host list replaced by the first host: its
	// scheme, user, path and query, parsed by net/url.
	*url.URL
	// Hosts are the hosts in the order of the URL, each as host:port (the
	// default port added where the URL gives none).
	Hosts []string
	raw   []string // the hosts as the URL writes them
}

// Parse splits the host list of a scheme://[user[:pass]@]host[:port][,…]/…
// URL, adding defaultPort to the hosts that name none. Every host must be a
// non-empty name or address with a port of 1..65535.
func Parse(s, defaultPort string) (*URL, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, errors.New("want scheme://host/…")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	userinfo, hostlist := "", authority
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		userinfo, hostlist = authority[:at+1], authority[at+1:]
	}
	var hosts []string
	raw := strings.Split(hostlist, ",")
	for _, h := range raw {
		hp, err := hostPort(h, defaultPort)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, hp)
	}
	u, err := url.Parse(scheme + "://" + userinfo + hosts[0] + tail)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return nil, err
	}
	return &URL{URL: u, Hosts: hosts, raw: raw}, nil
}

// hostPort checks one host of the list and gives it defaultPort if it names
// none.
func hostPort(h, defaultPort string) (string, error) {
	if h == "" {
		return "", errors.New("empty host in the host list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port: a name, an IPv4 address or a bracketed IPv6 address.
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), defaultPort
		if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[")) {
			return "", fmt.Errorf("host %q: write an IPv6 address in brackets, as in [::1]:%s", h, defaultPort)
		}
	}
	if host == "" {
		return "", fmt.Errorf("host %q: no host name", h)
	}
	if strings.ContainsAny(host, " \t/?#@") {
		return "", fmt.Errorf("host %q: a host name has no spaces or any of / ? # @", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("host %q: port must be 1..65535", h)
	}
	return net.JoinHostPort(host, port), nil
}

// String gives the URL back with its whole host list, as the URL wrote it.
func (u *URL) String() string { return u.with(u.URL) }

// Redacted gives the URL with its whole host list and the password, if
// any, replaced by xxxxx.
func (u *URL) Redacted() string {
	c := *u.URL
	if c.User != nil {
		if _, has := c.User.Password(); has {
			c.User = url.UserPassword(c.User.Username(), "xxxxx")
		}
	}
	return u.with(&c)
}

// with formats c with the host list in place of its one host.
func (u *URL) with(c *url.URL) string {
	const mark = "rowq-host-list.invalid"
	c2 := *c
	c2.Host = mark
	return strings.Replace(c2.String(), mark, strings.Join(u.raw, ","), 1)
}

// Redact hides the password of a database URL for logs, whatever its host
// list; ok is false when s is no URL this package parses.
func Redact(s string) (redacted string, ok bool) {
	u, err := Parse(s, "1")
	if err != nil {
		return "", false
	}
	if u.User == nil {
		return s, true
	}
	if _, has := u.User.Password(); !has {
		return s, true
	}
	return u.Redacted(), true
}
