// Package egress decides which worker addresses rowq may deliver to: the
// allow list of worker URLs (--worker-url-allow), checked when a job or
// schedule is stored and again before each delivery, and the addresses
// refused when a delivery's connection is dialled.
//
// The dial-time check is the one that matters against server-side request
// forgery: it looks at the IP address actually dialled, after name
// resolution, so a name that resolves (or is rebound) to a metadata
// service is caught. Link-local and cloud metadata addresses are always
// refused; loopback and private ranges only with --worker-deny-private,
// since workers on 127.0.0.1 are normal.
package egress

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"syscall"
)

// Error is a worker URL or address that the policy refuses. Its message
// says why and names the setting that decides, if any.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// Policy is the worker-URL allow list and the address rules. The zero
// Policy (and a nil *Policy) allows any http(s) URL and refuses only
// link-local and metadata addresses.
type Policy struct {
	prefixes    []urlPrefix
	hosts       []string // host globs, lower case
	nets        []netip.Prefix
	denyPrivate bool
}

// urlPrefix is an allow-list entry such as https://hooks.example.com/in/.
type urlPrefix struct {
	scheme, host, port string
	path               string // escaped, "/" for any
}

// Parse builds a policy from the comma-separated allow list (URL
// prefixes, host globs, CIDRs or single addresses; "" allows any URL) and
// the deny-private switch. Its errors name the entry at fault.
func Parse(allow string, denyPrivate bool) (*Policy, error) {
	p := &Policy{denyPrivate: denyPrivate}
	for _, e := range strings.Split(allow, ",") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if err := p.add(e); err != nil {
			return nil, fmt.Errorf("entry %q: %w", e, err)
		}
	}
	return p, nil
}

func (p *Policy) add(e string) error {
	switch {
	case strings.Contains(e, "://"):
		u, err := url.Parse(e)
		switch {
		case err != nil:
			return fmt.Errorf("not a URL: %w", err)
		case u.Scheme != "http" && u.Scheme != "https":
			return fmt.Errorf("scheme must be http or https")
		case u.Hostname() == "":
			return fmt.Errorf("a URL prefix must name a host")
		case u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
			return fmt.Errorf("a URL prefix is scheme, host, optional port and path only")
		}
		pp := u.EscapedPath()
		if pp == "" {
			pp = "/"
		}
		if pp != "/" && hasDotSegment(pp) {
			return fmt.Errorf("path must not hold . or .. segments or encoded slashes")
		}
		p.prefixes = append(p.prefixes, urlPrefix{scheme: u.Scheme, host: hostName(u), port: port(u), path: pp})
	case strings.Contains(e, "/"):
		n, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("not a CIDR such as 10.1.0.0/16: %w", err)
		}
		p.nets = append(p.nets, n.Masked())
	default:
		if a, err := netip.ParseAddr(e); err == nil {
			a = a.Unmap()
			p.nets = append(p.nets, netip.PrefixFrom(a, a.BitLen()))
			return nil
		}
		if strings.ContainsAny(e, ":@ \t") {
			return fmt.Errorf("want a URL prefix (https://host/path/), a host glob (*.svc.cluster.local) or a CIDR (10.1.0.0/16)")
		}
		g := strings.TrimSuffix(strings.ToLower(e), ".")
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("bad host glob: %w", err)
		}
		p.hosts = append(p.hosts, g)
	}
	return nil
}

// restricts reports whether the allow list holds any entry.
func (p *Policy) restricts() bool {
	return p != nil && len(p.prefixes)+len(p.hosts)+len(p.nets) > 0
}

// deniesPrivate reports whether loopback and private addresses are refused.
func (p *Policy) deniesPrivate() bool { return p != nil && p.denyPrivate }

// CheckURL checks an absolute http(s) worker URL: a host that is an IP
// address must not be refused (see Refused), and the URL must match an
// allow-list entry when there are some. Host names are not resolved: the
// dialer checks the addresses they resolve to (Control).
func (p *Policy) CheckURL(u *url.URL) error {
	host := hostName(u)
	addr, isIP := parseIP(host)
	if isIP {
		if why := p.Refused(addr); why != "" {
			return &Error{msg: fmt.Sprintf("%s is %s", host, why)}
		}
	}
	if !p.restricts() || p.allows(u, host, addr, isIP) {
		return nil
	}
	return &Error{msg: fmt.Sprintf("%q matches no entry of --worker-url-allow (ROWQ_WORKER_URL_ALLOW)", u.String())}
}

func (p *Policy) allows(u *url.URL, host string, addr netip.Addr, isIP bool) bool {
	for _, e := range p.prefixes {
		if e.match(u, host) {
			return true
		}
	}
	for _, g := range p.hosts {
		if ok, _ := path.Match(g, host); ok {
			return true
		}
	}
	return isIP && p.inNets(addr)
}

func (e urlPrefix) match(u *url.URL, host string) bool {
	if u.Scheme != e.scheme || host != e.host || port(u) != e.port {
		return false
	}
	if e.path == "/" {
		return true
	}
	pp := u.EscapedPath()
	if hasDotSegment(pp) {
		// /in/../admin starts with /in/ but is not under it once a server
		// resolves it.
		return false
	}
	if strings.HasSuffix(e.path, "/") {
		return strings.HasPrefix(pp, e.path)
	}
	return pp == e.path || strings.HasPrefix(pp, e.path+"/")
}

// hasDotSegment reports whether an escaped path holds a "." or ".."
// segment or an encoded slash or backslash, in any escaping: forms that a
// server may resolve to a path outside a prefix that the text matches.
func hasDotSegment(escaped string) bool {
	for seg := range strings.SplitSeq(escaped, "/") {
		s, err := url.PathUnescape(seg)
		if err != nil || s == "." || s == ".." || strings.ContainsAny(s, `/\`) {
			return true
		}
	}
	return false
}

// hostName is u's host without port, in lower case, without a trailing
// dot (which names the same host).
func hostName(u *url.URL) string {
	return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
}

// port is u's port, or its scheme's default.
func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// parseIP reads an IP address host (an IPv6 zone is dropped, an IPv4
// address mapped into IPv6 is read as IPv4).
func parseIP(host string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.WithZone("").Unmap(), true
}

// Addresses refused whatever the allow list says: link-local ranges (where
// AWS, GCP and Azure serve instance metadata and credentials) and the
// metadata addresses outside them.
var (
	linkLocal4   = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6   = netip.MustParsePrefix("fe80::/10")
	awsMetadata6 = netip.MustParseAddr("fd00:ec2::254")
	aliMetadata  = netip.MustParseAddr("100.100.100.200")
	// nat64 embeds an IPv4 address in IPv6 (RFC 6052); on a NAT64
	// network 64:ff9b::a9fe:a9fe reaches 169.254.169.254.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)

// Ranges refused with --worker-deny-private, besides loopback, RFC 1918
// and unique local addresses (netip.Addr.IsPrivate) and the unspecified
// address (which reaches the host itself).
var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10") // carrier-grade NAT
)

// Refused says why rowq does not deliver to addr ("" if it does): always
// for link-local and metadata addresses, and under --worker-deny-private
// for loopback and private ones outside the allow list's CIDRs (which
// name the private ranges where workers live).
func (p *Policy) Refused(addr netip.Addr) string {
	a := addr.WithZone("").Unmap()
	if nat64.Contains(a) {
		b := a.As16()
		a = netip.AddrFrom4([4]byte(b[12:]))
	}
	switch {
	case linkLocal4.Contains(a), linkLocal6.Contains(a):
		return "a link-local address, where cloud metadata services live; rowq never delivers there"
	case a == awsMetadata6, a == aliMetadata:
		return "a cloud metadata address; rowq never delivers there"
	}
	if p.deniesPrivate() && isPrivate(a) && !p.inNets(a) {
		return "a loopback or private address, refused by --worker-deny-private (ROWQ_WORKER_DENY_PRIVATE) unless in a CIDR of --worker-url-allow"
	}
	return ""
}

func isPrivate(a netip.Addr) bool {
	return a.IsLoopback() || a.IsPrivate() || a.IsUnspecified() || thisNetwork.Contains(a) || sharedSpace.Contains(a)
}

// inNets reports whether a CIDR or address of the allow list holds a.
func (p *Policy) inNets(a netip.Addr) bool {
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Control is a net.Dialer ControlContext that refuses to connect to an
// address Refused names, after resolution and before the connection is
// made. Its error is an *Error.
func (p *Policy) Control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Error{msg: fmt.Sprintf("refused to connect to %s: not an IP address and port", address)}
	}
	if why := p.Refused(ap.Addr()); why != "" {
		return &Error{msg: fmt.Sprintf("refused to connect to %s: %s", address, why)}
	}
	return nil
}

// Guard makes d check every address it dials with p.Control, and returns d.
func (p *Policy) Guard(d *net.Dialer) *net.Dialer {
	d.ControlContext = p.Control
	return d
}
