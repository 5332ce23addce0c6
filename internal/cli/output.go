package cli

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
	OutputText = "text"
	OutputJSON = "json"
	OutputYAML = "yaml"
)

// OutputFormats lists the accepted -o values.
var OutputFormats = []string{OutputText, OutputJSON, OutputYAML}

// OutputUsage is the help text of -o/--output.
const OutputUsage = "output format: text, json or yaml"

// AddOutputFlag registers -o and --output (one value, two names) on fs,
// filling *dst, whose current value is the default.
func AddOutputFlag(fs *flag.FlagSet, dst *string) {
	fs.StringVar(dst, "output", *dst, OutputUsage)
	fs.StringVar(dst, "o", *dst, "shorthand for --output")
}

// CheckOutput returns an error naming -o/--output unless format is one of
// OutputFormats.
func CheckOutput(format string) error {
	if !slices.Contains(OutputFormats, format) {
		return fmt.Errorf("-o/--output: want text, json or yaml, got %q", format)
	}
	return nil
}

// WriteOutput writes v to w as JSON or YAML (from its JSON form, so the
// field names are the json tags), or calls text for OutputText.
func WriteOutput(w io.Writer, format string, v any, text func(io.Writer) error) error {
	switch format {
	case OutputText:
		return text(w)
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case OutputYAML:
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
	return CheckOutput(format)
}

// deprecated is a flag.Value that forwards to target and warns once on
// stderr that name is deprecated in favour of replacement.
type deprecated struct {
	name, replacement string
	target            flag.Value
	stderr            io.Writer
	warned            bool
}

func (d *deprecated) String() string {
	if d == nil || d.target == nil {
		return ""
	}
	return d.target.String()
}

func (d *deprecated) Set(v string) error {
	if !d.warned {
		fmt.Fprintf(d.stderr, "warning: --%s is deprecated and will be removed in the next release: use --%s\n", d.name, d.replacement)
		d.warned = true
	}
	return d.target.Set(v)
}

// AddDeprecatedAlias registers --name as a deprecated alias of the flag
// replacement already on fs: it sets the same value and warns on stderr
// when used. It panics if replacement is not defined (a programming error).
func AddDeprecatedAlias(fs *flag.FlagSet, name, replacement string, stderr io.Writer) {
	f := fs.Lookup(replacement)
	if f == nil {
		panic("cli: deprecated alias of undefined flag --" + replacement)
	}
	fs.Var(&deprecated{name: name, replacement: replacement, target: f.Value, stderr: stderr}, name,
		"DEPRECATED: use --"+replacement+" (removed in the next release)")
}
