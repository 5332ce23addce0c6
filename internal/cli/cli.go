// Package cli holds the small flag helpers the binaries share.
package cli

import (
	"flag"
	"fmt"
	"strings"
)

// Parse parses args into fs and refuses positional arguments: every input
// of these binaries is a flag.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return nil
}

// StringList is a repeatable, comma-splitting string list flag value. The
// first Set replaces the default held in *dst; later ones append. Empty
// items are dropped.
type StringList struct {
	dst *[]string
	set bool
}

// NewStringList returns a flag.Value that fills *dst.
func NewStringList(dst *[]string) *StringList { return &StringList{dst: dst} }

// String is the current list, comma-joined (flag prints it as the default).
func (f *StringList) String() string {
	if f == nil || f.dst == nil {
		return ""
	}
	return strings.Join(*f.dst, ",")
}

// Set adds the comma-separated items of v.
func (f *StringList) Set(v string) error {
	if !f.set {
		*f.dst = nil
		f.set = true
	}
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*f.dst = append(*f.dst, item)
		}
	}
	return nil
}
