// Package output is the -o/--output flag of the tools (text, json, yaml).
// It is apart from internal/cli so that the servers, which have no -o, link
// no YAML library.
package output

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"

	"sigs.k8s.io/yaml"
)

// Output formats of -o/--output, the same name and meaning in every tool
// (as kubectl's): the human text, or the same data as JSON or YAML.
const (
	Text = "text"
	JSON = "json"
	YAML = "yaml"
)

// Formats lists the accepted -o values.
var Formats = []string{Text, JSON, YAML}

// Usage is the help text of -o/--output.
const Usage = "output format: text, json or yaml"

// AddFlag registers -o and --output (one value, two names) on fs,
// filling *dst, whose current value is the default.
func AddFlag(fs *flag.FlagSet, dst *string) {
	fs.StringVar(dst, "output", *dst, Usage)
	fs.StringVar(dst, "o", *dst, "shorthand for --output")
}

// Check returns an error naming -o/--output unless format is one of
// Formats.
func Check(format string) error {
	if !slices.Contains(Formats, format) {
		return fmt.Errorf("-o/--output: want text, json or yaml, got %q", format)
	}
	return nil
}

// Write writes v to w as JSON or YAML (from its JSON form, so the
// field names are the json tags), or calls text for Text.
func Write(w io.Writer, format string, v any, text func(io.Writer) error) error {
	switch format {
	case Text:
		return text(w)
	case JSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case YAML:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(b)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	return Check(format)
}
