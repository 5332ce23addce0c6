package manifests

import (
	"bytes"
	"errors"
	"github.com/wirekube/relay-ws/internal/test/render"
	"io"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// rendered is the output of kustomize for one directory.
type rendered struct {
	dir  string
	objs []*unstructured.Unstructured
}

// renderDir renders dir with render.Kustomize (see render.ResolveKustomize for which
// kustomize). A failure to find or install one fails the test: these checks
// are the only thing that renders the manifests in CI.
func renderDir(t *testing.T, dir string) *rendered {
	t.Helper()
	out, err := render.Kustomize(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatalf("decode %s: %v", dir, err)
	}
	return &rendered{dir: dir, objs: objs}
}

func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// all returns every object of kind.
func (r *rendered) all(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the single object of kind and name ("" matches any name).
func (r *rendered) one(t *testing.T, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range r.all(kind) {
		if name == "" || o.GetName() == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: %d objects of kind %s named %q, want 1", r.dir, len(found), kind, name)
	}
	return found[0]
}

// into converts an object to a typed API struct.
func into[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func (r *rendered) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	return into[appsv1.Deployment](t, r.one(t, "Deployment", "wirekube-relay-gateway"))
}

// container returns the container named name, or nil.
func container(d *appsv1.Deployment, name string) *corev1.Container {
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == name {
			return &d.Spec.Template.Spec.Containers[i]
		}
	}
	return nil
}

// flagValue returns the value of --name=value in args, and whether it is set.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// str walks a nested map by keys and returns the string there.
func str(obj map[string]any, keys ...string) string {
	s, _, _ := unstructured.NestedString(obj, keys...)
	return s
}

func mustf(t *testing.T, cond bool, format string, args ...any) {
	t.Helper()
	if !cond {
		t.Errorf(format, args...)
	}
}
