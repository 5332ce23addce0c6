package cli

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
	for _, format := range []string{OutputJSON, OutputYAML} {
		t.Run(format, func(t *testing.T) {
			var b strings.Builder
			if err := WriteOutput(&b, format, in, nil); err != nil {
				t.Fatal(err)
			}
			var out []item
			var err error
			if format == OutputJSON {
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
	if err := WriteOutput(&b, OutputText, in, func(w io.Writer) error { _, err := io.WriteString(w, "TEXT"); return err }); err != nil || b.String() != "TEXT" {
		t.Fatalf("text: %q %v", b.String(), err)
	}
	if err := WriteOutput(&b, "xml", in, nil); err == nil || !strings.Contains(err.Error(), "-o/--output") {
		t.Fatalf("xml: %v", err)
	}
}

func TestOutputFlagBothNames(t *testing.T) {
	for _, args := range [][]string{{"-o", "json"}, {"--output=json"}, {"-o=json"}} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		v := OutputText
		AddOutputFlag(fs, &v)
		if err := fs.Parse(args); err != nil || v != "json" {
			t.Errorf("%q: %q %v", args, v, err)
		}
	}
}

func TestDeprecatedAliasWarnsAndForwards(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var dst string
	fs.StringVar(&dst, "token-file", "", "new name")
	var stderr strings.Builder
	AddDeprecatedAlias(fs, "out-file", "token-file", &stderr)
	if err := fs.Parse([]string{"--out-file", "/tmp/x"}); err != nil {
		t.Fatal(err)
	}
	if dst != "/tmp/x" {
		t.Errorf("value %q, want it forwarded to --token-file", dst)
	}
	if !strings.Contains(stderr.String(), "warning: --out-file is deprecated") || !strings.Contains(stderr.String(), "use --token-file") {
		t.Errorf("stderr %q", stderr.String())
	}
	stderr.Reset()
	fs2 := flag.NewFlagSet("t", flag.ContinueOnError)
	fs2.StringVar(&dst, "token-file", "", "new name")
	AddDeprecatedAlias(fs2, "out-file", "token-file", &stderr)
	if err := fs2.Parse([]string{"--token-file", "/tmp/y"}); err != nil || stderr.Len() != 0 {
		t.Errorf("the new name warned: %q %v", stderr.String(), err)
	}
}
