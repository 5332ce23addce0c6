package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/wirekube/relay-ws/internal/test/benchrow"
)

// The lines that enclose the table in the document -doc names. Everything
// between them is the table of the last run; everything else is text
// written by hand, which a run never touches.
const (
	beginMarker = "<!-- benchtable:begin"
	endMarker   = "<!-- benchtable:end -->"
)

var errNoMarkers = errors.New("no benchtable:begin / benchtable:end marker lines")

// writeDoc replaces the table between the markers of the Markdown file at
// path with rows.
func writeDoc(path string, rows []benchrow.Row) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("doc: %w", err)
	}
	var table bytes.Buffer
	benchrow.Table(&table, rows)
	out, err := replaceTable(doc, table.Bytes())
	if err != nil {
		return fmt.Errorf("doc %s: %w", path, err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return fmt.Errorf("doc: %w", err)
	}
	return nil
}

// replaceTable returns doc with the lines between the begin marker's line
// and the end marker's line replaced by table (which ends in a newline).
func replaceTable(doc, table []byte) ([]byte, error) {
	b := bytes.Index(doc, []byte(beginMarker))
	if b < 0 {
		return nil, errNoMarkers
	}
	nl := bytes.IndexByte(doc[b:], '\n')
	if nl < 0 {
		return nil, errNoMarkers
	}
	bodyStart := b + nl + 1
	e := bytes.Index(doc[bodyStart:], []byte(endMarker))
	if e < 0 {
		return nil, errNoMarkers
	}
	bodyEnd := bodyStart + e
	out := append([]byte{}, doc[:bodyStart]...)
	out = append(out, table...)
	return append(out, doc[bodyEnd:]...), nil
}
