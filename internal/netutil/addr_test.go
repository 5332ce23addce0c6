package netutil

import (
	"strings"
	"testing"
)

func TestParseAddr(t *testing.T) {
	tests := []struct {
		in               string
		network, address string // empty: an error
	}{
		{"127.0.0.1:8081", "tcp", "127.0.0.1:8081"},
		{":9102", "tcp", ":9102"},
		{"[::1]:9001", "tcp", "[::1]:9001"},
		{"extauthz.wirekube-system.svc:9001", "tcp", "extauthz.wirekube-system.svc:9001"},
		{"unix:/run/wirekube/bridge.sock", "unix", "/run/wirekube/bridge.sock"},
		{"unix:", "", ""},
		{"127.0.0.1", "", ""},
		{"127.0.0.1:", "", ""},
		{"::1:9001", "", ""},
		{"", "", ""},
	}
	for _, tt := range tests {
		network, address, err := ParseAddr(tt.in)
		if tt.network == "" {
			if err == nil {
				t.Errorf("ParseAddr(%q) = %s %s, want an error", tt.in, network, address)
			}
			continue
		}
		if err != nil || network != tt.network || address != tt.address {
			t.Errorf("ParseAddr(%q) = %q %q %v, want %q %q", tt.in, network, address, err, tt.network, tt.address)
		}
	}
}

func TestCheckFlagNamesTheFlag(t *testing.T) {
	if err := CheckFlag("http-listen", "", true); err != nil {
		t.Errorf("empty with allowEmpty: %v", err)
	}
	for _, v := range []string{"", "nohostport", "unix:"} {
		err := CheckFlag("metrics-listen", v, false)
		if err == nil || !strings.HasPrefix(err.Error(), "--metrics-listen: ") {
			t.Errorf("CheckFlag(%q) = %v, want an error starting with --metrics-listen: ", v, err)
		}
	}
}

func TestUnixOrLoopback(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"unix:/run/wirekube-revocation/revocation.sock", true},
		{"127.0.0.1:9003", true},
		{"127.8.9.10:9003", true},
		{"[::1]:9003", true},
		{"localhost:9003", true},
		{"0.0.0.0:9003", false},
		{":9003", false}, // every interface
		{"[::]:9003", false},
		{"10.0.0.7:9003", false},
		{"extauthz.wirekube-system.svc:9003", false},
		{"localhost.example.com:9003", false},
		{"127.0.0.1", false}, // no port: not a host:port
		{"", false},
	}
	for _, tt := range tests {
		if got := UnixOrLoopback(tt.addr); got != tt.want {
			t.Errorf("UnixOrLoopback(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}
