// Package envoyconfig decodes the gateway's Envoy bootstrap configs (the
// data in the repository's envoy/ directory: envoy.yaml,
// envoy-plaintext.yaml, sds/tls.yaml) with go-control-plane's types. Only
// tests and the test harness use it: envoy/'s tests prove every config is
// one Envoy accepts and that it keeps each protection, the Envoy stand-in
// reads its limits and access log format from the shipped config, and the
// e2e suite uses Overrides to run the same config on ports chosen at run
// time when an envoy binary is on PATH.
package envoyconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	// Every typed_config type the shipped configs use (and the chart's
	// proxy_protocol listener filter, envoy.clientAddress.proxyProtocol)
	// must be registered, or protojson cannot resolve its Any and decoding
	// fails.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/local_ratelimit/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

// The shipped configs, by file name.
const (
	// TLSConfig terminates TLS in Envoy (certificates from a Secret).
	TLSConfig = "envoy.yaml"
	// PlaintextConfig is for a trusted TLS terminator in front (ALB, Ingress).
	PlaintextConfig = "envoy-plaintext.yaml"
	// SDSConfig is the file-based SDS resource TLSConfig's listener reads its
	// certificate through; deployments mount it at SDSConfigMountPath.
	SDSConfig = "sds/tls.yaml"
	// SDSConfigMountPath is where TLSConfig expects SDSConfig.
	SDSConfigMountPath = "/etc/envoy/config/sds-tls.yaml"
)

// Dir is the repository's envoy/ directory, found from this source file's
// path: the tests, the e2e suite and the demo are built from the source tree
// (not with -trimpath), so the path is there.
func Dir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("envoy: no source path for %q (built with -trimpath?)", file)
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "envoy"), nil
}

// Shipped returns the bytes of a shipped file (TLSConfig, PlaintextConfig or
// SDSConfig) as it is in envoy/.
func Shipped(name string) ([]byte, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		return nil, fmt.Errorf("envoy: shipped config %q: %w", name, err)
	}
	return data, nil
}

// LoadShipped reads and decodes a shipped config (TLSConfig or
// PlaintextConfig).
func LoadShipped(name string) (*bootstrapv3.Bootstrap, error) {
	data, err := Shipped(name)
	if err != nil {
		return nil, err
	}
	return Decode(data)
}

// Decode parses a YAML (or JSON) Envoy bootstrap. Unknown fields and
// unregistered typed_config types are errors, as they are for Envoy, and the
// result must pass go-control-plane's ValidateAll (the proto constraints Envoy
// checks at start).
func Decode(data []byte) (*bootstrapv3.Bootstrap, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("envoy: yaml: %w", err)
	}
	b := &bootstrapv3.Bootstrap{}
	if err := protojson.Unmarshal(js, b); err != nil {
		return nil, fmt.Errorf("envoy: decode bootstrap: %w", err)
	}
	if err := b.ValidateAll(); err != nil {
		return nil, fmt.Errorf("envoy: validate bootstrap: %w", err)
	}
	return b, nil
}

// DecodeSDS parses a file-based SDS resource file (a DiscoveryResponse in
// YAML) and returns its TLS Secrets, each validated.
func DecodeSDS(data []byte) ([]*tlsv3.Secret, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("envoy: sds yaml: %w", err)
	}
	dr := &discoveryv3.DiscoveryResponse{}
	if err := protojson.Unmarshal(js, dr); err != nil {
		return nil, fmt.Errorf("envoy: decode sds: %w", err)
	}
	var out []*tlsv3.Secret
	for _, r := range dr.GetResources() {
		sec := &tlsv3.Secret{}
		if err := r.UnmarshalTo(sec); err != nil {
			return nil, fmt.Errorf("envoy: sds resource %s: %w", r.GetTypeUrl(), err)
		}
		if err := sec.ValidateAll(); err != nil {
			return nil, fmt.Errorf("envoy: validate sds secret %q: %w", sec.GetName(), err)
		}
		out = append(out, sec)
	}
	return out, nil
}

// Load reads and decodes the config at path.
func Load(path string) (*bootstrapv3.Bootstrap, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("envoy: %w", err)
	}
	return Decode(data)
}

// Marshal encodes a bootstrap as JSON, which Envoy reads with -c file.json.
func Marshal(b *bootstrapv3.Bootstrap) ([]byte, error) {
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("envoy: encode bootstrap: %w", err)
	}
	return data, nil
}
