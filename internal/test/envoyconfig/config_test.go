package envoyconfig

import (
	"strings"
	"testing"
)

func TestDecodeRejects(t *testing.T) {
	good, err := Shipped(TLSConfig)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new, want string
	}{
		{"unknown field", "failure_mode_allow: false", "failure_mode_allow: false\n              fail_open: false", "unknown field"},
		{"unregistered type", "envoy.extensions.filters.http.router.v3.Router", "envoy.extensions.filters.http.nope.v3.Nope", "nope"},
		{"constraint violation", "connect_timeout: 1s", "connect_timeout: -1s", "validate"},
		{"wrong type", "port_value: 9001", "port_value: ninety", "portvalue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tt.old, tt.new, 1)
			if bad == string(good) {
				t.Fatalf("fixture: %q not found in %s", tt.old, TLSConfig)
			}
			_, err := Decode([]byte(bad))
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), tt.want) {
				t.Errorf("Decode error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestSDSRejects(t *testing.T) {
	good, err := Shipped(SDSConfig)
	if err != nil {
		t.Fatal(err)
	}
	if secrets, err := DecodeSDS(good); err != nil || len(secrets) != 1 {
		t.Fatalf("shipped SDS file: %d secrets, %v", len(secrets), err)
	}
	tests := []struct{ name, old, new, want string }{
		{"unknown field", "watched_directory:", "watched_dir:", "unknown field"},
		{"wrong type", "envoy.extensions.transport_sockets.tls.v3.Secret", "envoy.extensions.transport_sockets.tls.v3.Nope", "nope"},
		{"empty watched directory", "{path: /etc/envoy/tls}", "{path: \"\"}", "validate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := strings.Replace(string(good), tt.old, tt.new, 1)
			if bad == string(good) {
				t.Fatalf("fixture: %q not found", tt.old)
			}
			_, err := DecodeSDS([]byte(bad))
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), tt.want) {
				t.Errorf("DecodeSDS error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}
