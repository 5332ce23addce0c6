package contractdoc

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// Table is the first Markdown table below an anchor of a document.
type Table struct {
	Anchor string
	Header []string
	Rows   []Row
	// End is the index of the first line after the table.
	End int
}

// Row is one body row of a Table.
type Row struct {
	Line   int // 1-based line number in the document
	Cells  []string
	header []string
}

var codeCell = regexp.MustCompile("^`([a-z0-9_]+)`$")

// Code is the row's first cell without its backquotes ("" when the cell
// is not one `code`).
func (r Row) Code() string {
	if m := codeCell.FindStringSubmatch(r.Cells[0]); m != nil {
		return m[1]
	}
	return ""
}

// Cell is the cell under the header named h (case-insensitive), "" when
// the table has no such column.
func (r Row) Cell(h string) string {
	for i, name := range r.header {
		if strings.EqualFold(name, h) {
			return r.Cells[i]
		}
	}
	return ""
}

// Table returns the table of the section at anchor, failing the test when
// there is none or a row is malformed.
func (d *Doc) Table(t testing.TB, anchor string) Table {
	t.Helper()
	tb, err := d.ParseTable(anchor)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// ParseTable returns the first table below anchor. It is an error when the
// anchor is missing, another anchor comes before a table, the header is not
// followed by a |---| line, a row has another number of cells than the
// header, or the first cell of a row of a "code" table is not one `code`.
func (d *Doc) ParseTable(anchor string) (Table, error) {
	i, err := d.anchorLine(anchor)
	if err != nil {
		return Table{}, err
	}
	for i++; i < len(d.Lines) && !strings.HasPrefix(d.Lines[i], "|"); i++ {
		if strings.Contains(d.Lines[i], `<a id="`) {
			return Table{}, fmt.Errorf("%s:%d: section %q has no table before the next anchor", d.Path, i+1, anchor)
		}
	}
	return d.tableAt(i, anchor)
}

// tableAt parses the table whose header is line i, in the section anchor.
func (d *Doc) tableAt(i int, anchor string) (Table, error) {
	tb := Table{Anchor: anchor}
	if i+1 >= len(d.Lines) {
		return tb, fmt.Errorf("%s: section %q has no table", d.Path, anchor)
	}
	tb.Header = splitRow(d.Lines[i])
	if !isRule(d.Lines[i+1], len(tb.Header)) {
		return tb, fmt.Errorf("%s:%d: table of %q: the header is not followed by a |---| line of %d cells", d.Path, i+2, anchor, len(tb.Header))
	}
	codes := strings.EqualFold(tb.Header[0], "code")
	for i += 2; i < len(d.Lines) && strings.HasPrefix(d.Lines[i], "|"); i++ {
		r := Row{Line: i + 1, Cells: splitRow(d.Lines[i]), header: tb.Header}
		if len(r.Cells) != len(tb.Header) {
			return tb, fmt.Errorf("%s:%d: table of %q: %d cells, the header has %d", d.Path, i+1, anchor, len(r.Cells), len(tb.Header))
		}
		if codes && r.Code() == "" {
			return tb, fmt.Errorf("%s:%d: table of %q: first cell %q is not one `code`", d.Path, i+1, anchor, r.Cells[0])
		}
		tb.Rows = append(tb.Rows, r)
	}
	tb.End = i
	return tb, nil
}

var anchorRe = regexp.MustCompile(`<a id="([a-z0-9-]+)"></a>`)

// CodeTables returns every table of the document whose first header cell
// is "code", each with the anchor of the section above it, failing the
// test on a malformed one.
func (d *Doc) CodeTables(t testing.TB) []Table {
	t.Helper()
	tbs, err := d.parseCodeTables()
	if err != nil {
		t.Fatal(err)
	}
	return tbs
}

func (d *Doc) parseCodeTables() ([]Table, error) {
	var out []Table
	anchor := ""
	for i := 0; i < len(d.Lines); i++ {
		line := d.Lines[i]
		if !strings.HasPrefix(line, "|") {
			if m := anchorRe.FindStringSubmatch(line); m != nil {
				anchor = m[1]
			}
			continue
		}
		if !strings.EqualFold(splitRow(line)[0], "code") {
			for i+1 < len(d.Lines) && strings.HasPrefix(d.Lines[i+1], "|") {
				i++ // another table: skip it whole
			}
			continue
		}
		tb, err := d.tableAt(i, anchor)
		if err != nil {
			return nil, err
		}
		out = append(out, tb)
		i = tb.End - 1
	}
	return out, nil
}

// Codes is the code of every row of the table.
func (tb Table) Codes() []string {
	out := make([]string, 0, len(tb.Rows))
	for _, r := range tb.Rows {
		out = append(out, r.Code())
	}
	return out
}

// ParagraphAfter is the paragraph right below the table of anchor, its
// lines joined by spaces.
func (d *Doc) ParagraphAfter(t testing.TB, anchor string) string {
	t.Helper()
	tb := d.Table(t, anchor)
	i := tb.End
	for i < len(d.Lines) && strings.TrimSpace(d.Lines[i]) == "" {
		i++
	}
	var para []string
	for ; i < len(d.Lines) && strings.TrimSpace(d.Lines[i]) != ""; i++ {
		para = append(para, strings.TrimSpace(d.Lines[i]))
	}
	return strings.Join(para, " ")
}

func splitRow(line string) []string {
	cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

func isRule(line string, n int) bool {
	cells := splitRow(line)
	if len(cells) != n {
		return false
	}
	for _, c := range cells {
		if strings.Trim(c, ":-") != "" || !strings.Contains(c, "---") {
			return false
		}
	}
	return true
}

// SplitRow splits a Markdown table line in its trimmed cells.
func SplitRow(line string) []string { return splitRow(line) }

// Anchors is the set of the document's anchors (<a id="...">).
func (d *Doc) Anchors() map[string]bool {
	out := map[string]bool{}
	for _, m := range anchorRe.FindAllStringSubmatch(d.Text(), -1) {
		out[m[1]] = true
	}
	return out
}
