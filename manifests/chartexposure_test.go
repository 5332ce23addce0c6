package manifests

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/wirekube/relay-ws/internal/test/render"
)

// exposureSpec is what must agree between the chart's and an example's
// Ingress or HTTPRoute: the annotations and the spec (labels are Helm's).
func exposureSpec(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	out, err := yaml.Marshal(map[string]any{"annotations": o.GetAnnotations(), "spec": o.Object["spec"]})
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestChartExposureMatchesExamples: the chart's Ingress (ingress-nginx with
// front=none, ALB with Envoy's TLS) and HTTPRoute are the kustomize examples'
// objects, whose annotations the examples' comments and the e2e fronts
// justify, with the example's placeholders filled from the values.
func TestChartExposureMatchesExamples(t *testing.T) {
	for _, tc := range []struct {
		name, kind, example string
		set                 string
	}{
		{"ingress-nginx", "Ingress", "examples/ingress-nginx",
			"front=none,ingress.enabled=true,ingress.controller=ingress-nginx," + signingSecretSet},
		{"alb", "Ingress", "examples/alb-ingress",
			"ingress.enabled=true,ingress.controller=alb,ingress.alb.certificateArn=arn:aws:acm:REGION:ACCOUNT:certificate/REPLACE"},
		{"gateway-api", "HTTPRoute", "examples/gateway-api",
			"envoy.config=envoy-plaintext.yaml,httpRoute.enabled=true,httpRoute.parentRefs[0].name=public-gateway,httpRoute.parentRefs[0].namespace=gateway-system,httpRoute.parentRefs[0].sectionName=https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The chart refuses the examples' placeholder host (a reserved
			// name); render a real one and put the placeholder back.
			chart := renderChart(t, "--set", "publicHost=relay.corp.internal,"+tc.set).one(t, tc.kind, "wirekube-relay-gateway")
			example := renderDir(t, tc.example).one(t, tc.kind, "wirekube-relay-gateway")
			got := strings.ReplaceAll(exposureSpec(t, chart), "relay.corp.internal", "relay.example.com")
			want := exposureSpec(t, example)
			mustf(t, got == want, "chart %s differs from %s:\n--- chart\n%s--- example\n%s", tc.kind, tc.example, got, want)
		})
	}
}

// TestChartExposureRefuses: shapes where the route would reach the bridge
// without extauthz, or miss what the controller needs, fail naming the value.
func TestChartExposureRefuses(t *testing.T) {
	for set, names := range map[string]string{
		"front=none,ingress.enabled=true,ingress.controller=alb":                                                         "ingress.controller=alb with front=none",
		"front=none,ingress.enabled=true,ingress.controller=other":                                                       "ingress.controller=other with front=none",
		"ingress.enabled=true,ingress.controller=alb":                                                                    "ingress.alb.certificateArn",
		"httpRoute.enabled=true,httpRoute.parentRefs[0].name=gw":                                                         "httpRoute.enabled needs front=envoy with envoy.config=envoy-plaintext.yaml",
		"front=none,httpRoute.enabled=true,httpRoute.parentRefs[0].name=gw":                                              "httpRoute.enabled needs front=envoy",
		"envoy.config=envoy-plaintext.yaml,httpRoute.enabled=true":                                                       "httpRoute.parentRefs",
		"certificate.enabled=true":                                                                                       "certificate.issuerRef.name",
		"certificate.enabled=true,certificate.issuerRef.name=le":                                                         "publicHost \"relay.example.com\" is a reserved example name",
		"publicHost=relay.test,httpRoute.enabled=true,envoy.config=envoy-plaintext.yaml,httpRoute.parentRefs[0].name=gw": "is a reserved example name",
	} {
		t.Run(set, func(t *testing.T) {
			_, err := render.HelmTemplate(t.Context(), chartDir, namespace, "--set", set+","+signingSecretSet)
			mustf(t, err != nil && strings.Contains(err.Error(), names), "got %v, want a refusal naming %q", err, names)
		})
	}
}

// TestChartCertificate: the Certificate names the public host and writes
// the Secret Envoy serves; off by default, with nothing else of the three.
func TestChartCertificate(t *testing.T) {
	for _, kind := range []string{"Ingress", "HTTPRoute", "Certificate"} {
		mustf(t, len(renderChart(t).all(kind)) == 0, "a default install renders a %s", kind)
	}
	r := renderChart(t, "--set", "publicHost=relay.corp.internal,certificate.enabled=true,certificate.issuerRef.name=letsencrypt")
	c := r.one(t, "Certificate", "wirekube-relay-gateway")
	secret, _, _ := unstructured.NestedString(c.Object, "spec", "secretName")
	hosts, _, _ := unstructured.NestedStringSlice(c.Object, "spec", "dnsNames")
	issuer, _, _ := unstructured.NestedStringMap(c.Object, "spec", "issuerRef")
	mustf(t, reflect.DeepEqual(hosts, []string{"relay.corp.internal"}), "dnsNames %v", hosts)
	mustf(t, issuer["name"] == "letsencrypt" && issuer["kind"] == "ClusterIssuer", "issuerRef %v", issuer)
	served := ""
	for _, v := range r.deployment(t).Spec.Template.Spec.Volumes {
		if v.Name == "tls" && v.Secret != nil {
			served = v.Secret.SecretName
		}
	}
	mustf(t, secret != "" && secret == served, "Certificate writes %q, Envoy serves %q", secret, served)
}
