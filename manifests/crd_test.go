package manifests

import (
	"github.com/wirekube/relay-ws/internal/test/render"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"
)

// crdDoc is the part of a CustomResourceDefinition the checks read (the
// apiextensions module is not a dependency of this project).
type crdDoc struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Group string `json:"group"`
		Scope string `json:"scope"`
		Names struct {
			Kind       string   `json:"kind"`
			Plural     string   `json:"plural"`
			ShortNames []string `json:"shortNames"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Schema *struct {
				OpenAPIV3Schema schemaDoc `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

type schemaDoc struct {
	Type       string               `json:"type"`
	Properties map[string]schemaDoc `json:"properties"`
}

func TestPeerCRD(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", render.PeerCRDPath))
	if err != nil {
		t.Fatalf("PeerCRDPath: %v", err)
	}
	var crd crdDoc
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	s := crd.Spec
	mustf(t, crd.Metadata.Name == "wirekubepeers.wirekube.io" && s.Group == "wirekube.io" && s.Scope == "Cluster",
		"want cluster-scoped wirekubepeers.wirekube.io, got %s %s", crd.Metadata.Name, s.Scope)
	mustf(t, s.Names.Kind == "WireKubePeer" && s.Names.Plural == "wirekubepeers" && slices.Equal(s.Names.ShortNames, []string{"wkpeer"}),
		"names %+v", s.Names)
	if len(s.Versions) != 1 || s.Versions[0].Name != "v1alpha1" || s.Versions[0].Schema == nil {
		t.Fatalf("want one v1alpha1 version with a schema")
	}
	spec := s.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	for field, typ := range map[string]string{"publicKey": "string", "endpoint": "string", "allowedIPs": "array", "persistentKeepalive": "integer"} {
		mustf(t, spec[field].Type == typ, "spec.%s type %q, want %s", field, spec[field].Type, typ)
	}
}

func TestCRDsEmbedded(t *testing.T) {
	files, err := render.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range files {
		var crd crdDoc
		if err := yaml.Unmarshal(f.Data, &crd); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		kinds = append(kinds, crd.Spec.Names.Kind)
	}
	// Every kind a rendered directory uses beyond the built-in ones.
	for _, k := range []string{"WireKubePeer", "WireKubeMesh", "HTTPRoute", "AuthorizationPolicy", "SecurityPolicy", "PodMonitor"} {
		mustf(t, slices.Contains(kinds, k), "no CRD fixture for %s (have %v)", k, kinds)
	}
	mustf(t, len(kinds) > 1 && (kinds[0] == "WireKubeMesh" || kinds[0] == "WireKubePeer"), "WireKube CRDs must come first: %v", kinds)
	for i, f := range files {
		var crd crdDoc
		_ = yaml.Unmarshal(f.Data, &crd)
		mustf(t, crd.Kind == "CustomResourceDefinition", "%s (#%d) is a %q", f.Name, i, crd.Kind)
	}
}
