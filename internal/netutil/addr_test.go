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
