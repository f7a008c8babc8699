package egress_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/egress"
)

func mustParse(t *testing.T, allow string, denyPrivate bool) *egress.Policy {
	t.Helper()
	p, err := egress.Parse(allow, denyPrivate)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParse_RefusesBadEntries(t *testing.T) {
	for _, e := range []string{
		"ftp://files.example.com/",
		"https:///path",
		"https://user@hooks.example.com/",
		"https://hooks.example.com/?x=1",
		"https://hooks.example.com/in/../admin/",
		"10.1.0.0/33",
		"10.1.0.0/abc",
		"hooks.example.com:8080",
		"[a-",
	} {
		t.Run(e, func(t *testing.T) {
			_, err := egress.Parse("https://ok.example.com/,"+e, false)
			if err == nil || !strings.Contains(err.Error(), e) {
				t.Fatalf("Parse(%q) = %v, want an error naming the entry", e, err)
			}
		})
	}
}

func TestCheckURL_AllowList(t *testing.T) {
	p := mustParse(t, " https://hooks.example.com/in/, https://api.example.com/v1, *.svc.cluster.local,10.1.0.0/16, 192.0.2.7,2001:db8::/32,", false)
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"https://hooks.example.com/in/", true},
		{"https://hooks.example.com/in/job?x=1", true},
		{"https://HOOKS.example.com./in/job", true},
		{"https://hooks.example.com:443/in/job", true},
		{"https://hooks.example.com/in", false},
		{"https://hooks.example.com/inbox/", false},
		{"https://hooks.example.com/admin/", false},
		{"https://hooks.example.com/in/../admin/", false},
		{"https://hooks.example.com/in/%2e%2e/admin/", false},
		{"https://hooks.example.com/in/..%2fadmin", false},
		{"http://hooks.example.com/in/job", false},
		{"https://hooks.example.com:8443/in/job", false},
		{"https://hooks.example.com.evil.test/in/job", false},
		{"https://hooks.example.com@evil.test/in/job", false},
		{"https://api.example.com/v1", true},
		{"https://api.example.com/v1/jobs", true},
		{"https://api.example.com/v10", false},
		{"http://worker.ns.svc.cluster.local:8080/run", true},
		{"https://a.b.svc.cluster.local/", true},
		{"http://svc.cluster.local/", false},
		{"http://cluster.local.evil.test/", false},
		{"http://10.1.200.3:9000/", true},
		{"http://[::ffff:10.1.0.9]/", true},
		{"http://10.2.0.1/", false},
		{"http://192.0.2.7/", true},
		{"http://192.0.2.8/", false},
		{"http://[2001:db8::5]/", true},
		{"http://worker.example.net/", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			err := p.CheckURL(mustURL(t, tc.url))
			if got := err == nil; got != tc.want {
				t.Fatalf("CheckURL(%s) = %v, want allowed %v", tc.url, err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "--worker-url-allow") {
				t.Fatalf("error %q does not name the setting", err)
			}
		})
	}
}

func TestCheckURL_EmptyAllowsAnyButMetadata(t *testing.T) {
	var nilPolicy *egress.Policy
	for _, p := range []*egress.Policy{nilPolicy, mustParse(t, "", false)} {
		for _, u := range []string{"http://127.0.0.1:9000/", "https://example.com/x", "http://10.0.0.1/"} {
			if err := p.CheckURL(mustURL(t, u)); err != nil {
				t.Errorf("CheckURL(%s) = %v, want allowed", u, err)
			}
		}
		for _, u := range []string{
			"http://169.254.169.254/latest/meta-data/",
			"http://[fe80::1%25eth0]/",
			"http://[fd00:ec2::254]/",
			"http://100.100.100.200/",
			"http://[::ffff:169.254.169.254]/",
			"http://[64:ff9b::a9fe:a9fe]/",
		} {
			if err := p.CheckURL(mustURL(t, u)); err == nil || !strings.Contains(err.Error(), "never delivers") {
				t.Errorf("CheckURL(%s) = %v, want refused", u, err)
			}
		}
	}
}

func TestRefused_Ranges(t *testing.T) {
	// The allow list does not lift the refusal of metadata addresses, but
	// its CIDRs do lift deny-private's.
	open, closed := mustParse(t, "", false), mustParse(t, "169.254.0.0/16,10.3.0.0/16", true)
	for _, tc := range []struct {
		addr            string
		always, private bool
	}{
		{"169.254.169.254", true, true},
		{"169.254.0.1", true, true},
		{"fe80::a", true, true},
		{"fd00:ec2::254", true, true},
		{"100.100.100.200", true, true},
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"10.3.4.5", false, false},
		{"10.4.0.1", false, true},
		{"172.16.0.1", false, true},
		{"192.168.1.1", false, true},
		{"fd12::1", false, true},
		{"0.0.0.0", false, true},
		{"::", false, true},
		{"100.64.0.1", false, true},
		{"::ffff:127.0.0.1", false, true},
		{"93.184.216.34", false, false},
		{"2606:2800::1", false, false},
		{"172.32.0.1", false, false},
	} {
		a := netip.MustParseAddr(tc.addr)
		if got := open.Refused(a) != ""; got != tc.always {
			t.Errorf("Refused(%s) without deny-private = %v, want %v", a, got, tc.always)
		}
		if got := closed.Refused(a) != ""; got != tc.private {
			t.Errorf("Refused(%s) with deny-private = %v, want %v", a, got, tc.private)
		}
	}
}

// fakeDNS answers every A question with addr and every other with no
// record: a name that resolves where the test says.
func fakeDNS(t *testing.T, addr netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], addr); resp != nil {
				pc.WriteTo(resp, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// dnsAnswer builds the answer to query (RFC 1035 §4.1): the header, the
// question as asked and, for an A question, one record.
func dnsAnswer(query []byte, addr netip.Addr) []byte {
	if len(query) < 12 {
		return nil
	}
	end := 12
	for end < len(query) && query[end] != 0 {
		end += int(query[end]) + 1
	}
	end += 5 // the root label, QTYPE, QCLASS
	if end > len(query) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(query[end-4:])
	resp := append([]byte(nil), query[:2]...)               // id
	resp = append(resp, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0) // answer, recursion; 1 question
	resp = append(resp, query[12:end]...)                   // the question
	if qtype == 1 {                                         // A
		resp[7] = 1                                                  // 1 answer
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4) // name → question, A, IN, TTL 60, 4 bytes
		a := addr.As4()
		resp = append(resp, a[:]...)
	}
	return resp
}

// TestGuard_RefusesNameResolvingToMetadata dials a name that DNS resolves
// to the metadata address: the guard refuses the resolved address, though
// the URL passes CheckURL.
func TestGuard_RefusesNameResolvingToMetadata(t *testing.T) {
	p := mustParse(t, "*.example.test", false)
	u := mustURL(t, "http://metadata.example.test/latest/meta-data/")
	if err := p.CheckURL(u); err != nil {
		t.Fatalf("CheckURL(%s) = %v; the name is allowed, only its address is not", u, err)
	}
	d := p.Guard(&net.Dialer{Timeout: 2 * time.Second, Resolver: fakeDNS(t, netip.MustParseAddr("169.254.169.254"))})
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	_, err := client.Get(u.String())
	var refused *egress.Error
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "169.254.169.254:80") {
		t.Fatalf("GET %s = %v, want an *egress.Error naming 169.254.169.254:80", u, err)
	}
}

// TestGuard_DenyPrivate dials a worker on 127.0.0.1 by a name: allowed by
// default, refused with deny-private, allowed again when a CIDR of the
// allow list holds the address.
func TestGuard_DenyPrivate(t *testing.T) {
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(worker.Close)
	_, port, _ := net.SplitHostPort(worker.Listener.Addr().String())
	resolver := fakeDNS(t, netip.MustParseAddr("127.0.0.1"))
	for _, tc := range []struct {
		allow   string
		deny    bool
		refused bool
	}{
		{"", false, false},
		{"", true, true},
		{"*.example.test", true, true},
		{"*.example.test,127.0.0.0/8", true, false},
	} {
		d := mustParse(t, tc.allow, tc.deny).Guard(&net.Dialer{Timeout: 2 * time.Second, Resolver: resolver})
		client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
		resp, err := client.Get("http://worker.example.test:" + port + "/")
		var refused *egress.Error
		switch {
		case !tc.refused && err != nil:
			t.Fatalf("allow %q, deny-private %v: %v, want the worker's answer", tc.allow, tc.deny, err)
		case tc.refused && (!errors.As(err, &refused) || !strings.Contains(err.Error(), "--worker-deny-private")):
			t.Fatalf("allow %q, deny-private %v: %v, want an *egress.Error naming --worker-deny-private", tc.allow, tc.deny, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
