package output

import (
	"encoding/json"
	"flag"
	"io"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type item struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

func TestWriteOutputRoundTrips(t *testing.T) {
	in := []item{{"a", 1}, {"b", 2}}
	for _, format := range []string{JSON, YAML} {
		t.Run(format, func(t *testing.T) {
			var b strings.Builder
			if err := Write(&b, format, in, nil); err != nil {
				t.Fatal(err)
			}
			var out []item
			var err error
			if format == JSON {
				err = json.Unmarshal([]byte(b.String()), &out)
			} else {
				err = yaml.Unmarshal([]byte(b.String()), &out)
			}
			if err != nil || len(out) != 2 || out[1] != in[1] {
				t.Fatalf("parsed %+v (%v) from:\n%s", out, err, b.String())
			}
		})
	}
	var b strings.Builder
	if err := Write(&b, Text, in, func(w io.Writer) error { _, err := io.WriteString(w, "TEXT"); return err }); err != nil || b.String() != "TEXT" {
		t.Fatalf("text: %q %v", b.String(), err)
	}
	if err := Write(&b, "xml", in, nil); err == nil || !strings.Contains(err.Error(), "-o/--output") {
		t.Fatalf("xml: %v", err)
	}
}

func TestOutputFlagBothNames(t *testing.T) {
	for _, args := range [][]string{{"-o", "json"}, {"--output=json"}, {"-o=json"}} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		v := Text
		AddFlag(fs, &v)
		if err := fs.Parse(args); err != nil || v != "json" {
			t.Errorf("%q: %q %v", args, v, err)
		}
	}
}
