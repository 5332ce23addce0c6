package cli

import (
	"flag"
	"fmt"
	"io"
)

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
