package chartdoc

import (
	"strings"
	"testing"
)

func TestValues(t *testing.T) {
	src := []byte(`# A section heading.

# Replicas, at least two.
replicas: 2
image:
  # The repository.
  repository: ghcr.io/x
  tag: ""
bridge:
  extraArgs: [] # More flags.
  resources:
    requests: {cpu: 10m}
labels: {}
`)
	got, err := Values(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Value{
		// The file's first comment, followed by an empty line, is the
		// document's, not the first key's.
		{Path: "replicas", Default: "2", Meaning: "Replicas, at least two."},
		{Path: "image.repository", Default: `"ghcr.io/x"`, Meaning: "The repository."},
		{Path: "image.tag", Default: `""`, Inherited: true},
		{Path: "bridge.extraArgs", Default: "[]", Meaning: "More flags."},
		{Path: "bridge.resources.requests.cpu", Default: `"10m"`, Inherited: true},
		{Path: "labels", Default: "{}", Inherited: true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d values %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRenderEscapesPipes(t *testing.T) {
	out := Render(Chart{Name: "c"}, []Value{{Path: "a", Default: `"x|y"`, Meaning: "one | two"}})
	if !strings.Contains(out, "| `a` | `\"x\\|y\"` | one \\| two |") {
		t.Errorf("row not escaped:\n%s", out)
	}
}
