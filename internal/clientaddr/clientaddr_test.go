package clientaddr

import (
	"net"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"203.0.113.7", "203.0.113.7"},
		{" 203.0.113.7 ", "203.0.113.7"},
		{"203.0.113.7:51234", "203.0.113.7"},
		{"2001:db8::1", "2001:db8::1"},
		{"2001:DB8:0:0::1", "2001:db8::1"},
		{"[2001:db8::1]:443", "2001:db8::1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"fe80::1%eth0", "fe80::1"},
		{"127.0.0.1", "127.0.0.1"},
		{"", Unknown},
		{"  ", Unknown},
		{"unknown", Invalid},
		{"203.0.113.7\r\nX-Evil: 1", Invalid},
		{"1.2.3", Invalid},
		{"eyJhbGciOiJSUzI1NiJ9.e30.sig", Invalid},
		{"[2001:db8::1]", Invalid},
	} {
		if got := Canonical(tc.in); got != tc.want {
			t.Errorf("Canonical(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestFromForwardedFor(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []string
		hops   int
		want   string // "" with ok false
	}{
		{"none", nil, 0, ""},
		{"empty line", []string{""}, 0, ""},
		{"only commas", []string{" , ,"}, 1, ""},
		{"one entry", []string{"192.0.2.1"}, 0, "192.0.2.1"},
		{"forged left of the front's own entry", []string{"6.6.6.6, 127.0.0.1"}, 0, "127.0.0.1"},
		{"one trusted hop", []string{"6.6.6.6, 203.0.113.7, 10.0.0.5"}, 1, "203.0.113.7"},
		{"two trusted hops", []string{"6.6.6.6, 203.0.113.7, 10.0.0.5, 10.0.0.6"}, 2, "203.0.113.7"},
		{"lines in order", []string{"6.6.6.6, 203.0.113.7", "10.0.0.5"}, 1, "203.0.113.7"},
		{"last line is the front's", []string{"6.6.6.6", "10.0.0.5"}, 0, "10.0.0.5"},
		{"shorter than the hops: the first", []string{"10.0.0.5"}, 1, "10.0.0.5"},
		{"empty entries skipped", []string{"203.0.113.7,, 10.0.0.5,"}, 1, "203.0.113.7"},
		{"not parsed here", []string{"junk"}, 0, "junk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FromForwardedFor(tc.values, tc.hops)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("FromForwardedFor(%q, %d) = %q, %v; want %q", tc.values, tc.hops, got, ok, tc.want)
			}
		})
	}
}

func TestReadingACanonicalEntryAllocatesNothing(t *testing.T) {
	v := []string{"6.6.6.6, 2001:db8::7", "10.0.0.5"}
	if n := testing.AllocsPerRun(100, func() {
		e, _ := FromForwardedFor(v, 1)
		_ = Canonical(e)
	}); n != 0 {
		t.Fatalf("FromForwardedFor and Canonical allocate %.0f times, want 0", n)
	}
}

// FuzzClientAddress: whatever a client writes into X-Forwarded-For, the
// chosen entry is a substring of what was sent, and what is recorded is
// Invalid, Unknown (nothing sent) or an address that reads back as itself.
func FuzzClientAddress(f *testing.F) {
	for _, s := range []string{"6.6.6.6, 127.0.0.1", "203.0.113.7:1", "[::1]:2", ",,", "fe80::1%eth0", "\x00"} {
		f.Add(s, 0)
		f.Add(s, 1)
	}
	f.Fuzz(func(t *testing.T, xff string, hops int) {
		if hops < 0 || hops > MaxTrustedHops {
			return
		}
		e, ok := FromForwardedFor([]string{xff}, hops)
		if ok && (e == "" || !strings.Contains(xff, e)) {
			t.Fatalf("entry %q not in %q", e, xff)
		}
		c := Canonical(e)
		if c != Invalid && c != Unknown && Canonical(c) != c {
			t.Fatalf("Canonical(%q) = %q, which is not canonical", e, c)
		}
	})
}

func TestFrontTrusted(t *testing.T) {
	trusted, err := ParsePrefixes(" 127.0.0.0/8, ::1 ,10.4.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		remote string // net/http's RemoteAddr
		want   bool
	}{
		{"127.0.0.1:40000", true},
		{"127.9.9.9:1", true},
		{"[::1]:40000", true},
		{"[::ffff:127.0.0.1]:1", true},
		{"10.4.200.1:5000", true},
		{"10.5.0.1:5000", false},
		{"[::2]:1", false},
		{"192.0.2.1:1", false},
		{"127.0.0.1", false}, // not a connection's address: unknown
		{"", false},
		{"@", false},
	} {
		if got := FrontOfString(tc.remote).TrustedBy(trusted); got != tc.want {
			t.Errorf("FrontOfString(%q).TrustedBy = %v, want %v", tc.remote, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		addr net.Addr
		want bool
	}{
		{"tcp loopback", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, true},
		{"tcp other", &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}, false},
		{"unix socket", &net.UnixAddr{Name: "@", Net: "unix"}, true},
		{"none", nil, false},
		{"udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, false},
	} {
		if got := FrontOf(tc.addr).TrustedBy(trusted); got != tc.want {
			t.Errorf("%s: FrontOf(%v).TrustedBy = %v, want %v", tc.name, tc.addr, got, tc.want)
		}
	}
	if FrontOfString("127.0.0.1:1").TrustedBy(nil) {
		t.Error("no trusted prefixes: loopback trusted")
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes(DefaultTrustedProxies)
	if err != nil || len(got) != 2 || got[0].String() != "127.0.0.0/8" || got[1].String() != "::1/128" {
		t.Fatalf("ParsePrefixes(default) = %v, %v", got, err)
	}
	if got, err := ParsePrefixes("10.1.2.3/8"); err != nil || got[0].String() != "10.0.0.0/8" {
		t.Errorf("a prefix with host bits: %v, %v; want 10.0.0.0/8", got, err)
	}
	if got, err := ParsePrefixes(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v; want none", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "fe80::1%eth0", "10.0.0.1:80"} {
		if _, err := ParsePrefixes(bad); err == nil {
			t.Errorf("ParsePrefixes(%q) = nil error", bad)
		}
	}
}
