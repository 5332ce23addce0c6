package contractdoc

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const sample = `# Sample

<a id="codes"></a>
### Codes

| code | HTTP | when |
|---|---|---|
| ` + "`alpha`" + ` | 400 | first |
| ` + "`beta`" + ` | 403 | silent for 3 to 3.25 ` + "`--ping-interval`s" + ` |

A paragraph
in two lines.

<a id="empty"></a>
### Empty

<a id="next"></a>
`

// TestParseTableReadsRowsByAnchor: the rows, cells by header and the
// paragraph below come from the table of the named section only.
func TestParseTableReadsRowsByAnchor(t *testing.T) {
	d := Parse("sample.md", sample)
	tb := d.Table(t, "codes")
	if got, want := tb.Codes(), []string{"alpha", "beta"}; !slices.Equal(got, want) {
		t.Errorf("codes %q, want %q", got, want)
	}
	if got := tb.Rows[1].Cell("http"); got != "403" {
		t.Errorf("beta's HTTP cell %q, want 403", got)
	}
	if got := tb.Rows[1].Line; got != 9 {
		t.Errorf("beta's line %d, want 9", got)
	}
	if got := d.ParagraphAfter(t, "codes"); got != "A paragraph in two lines." {
		t.Errorf("paragraph %q", got)
	}
}

// TestParseTableRejectsMalformedRows: a row with a missing cell, a first
// cell that is not one `code`, a missing anchor or a section without a
// table is an error naming the line, never a short table.
func TestParseTableRejectsMalformedRows(t *testing.T) {
	for name, c := range map[string]struct{ text, anchor, want string }{
		"missing cell":  {strings.Replace(sample, "| 400 | first |", "| first |", 1), "codes", "sample.md:8: table of \"codes\": 2 cells, the header has 3"},
		"bare code":     {strings.Replace(sample, "`alpha`", "alpha", 1), "codes", "sample.md:8: table of \"codes\": first cell \"alpha\" is not one `code`"},
		"no rule":       {strings.Replace(sample, "|---|---|---|\n", "", 1), "codes", "sample.md:7: table of \"codes\": the header is not followed"},
		"no anchor":     {sample, "gone", "no anchor \"gone\""},
		"section empty": {sample, "empty", "section \"empty\" has no table before the next anchor"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("sample.md", c.text).ParseTable(c.anchor)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestSilences: every wording of a silence range is found, with its
// numbers as written.
func TestSilences(t *testing.T) {
	got := Silences("closed after 3 to 3.25 `--ping-interval`s; 2 to 2.5 periods, 4 to 5 intervals, 1 to 2 seconds")
	var ranges []string
	for _, s := range got {
		ranges = append(ranges, s.String())
	}
	if want := []string{"3 to 3.25", "2 to 2.5", "4 to 5"}; !slices.Equal(ranges, want) {
		t.Errorf("ranges %q, want %q", ranges, want)
	}
	if lo, hi := got[0].Floats(); lo != 3 || hi != 3.25 {
		t.Errorf("floats %g, %g, want 3, 3.25", lo, hi)
	}
}

// TestSpecSilenceIsThePingTimeoutRow: the range of the real spec is the one
// its ping_timeout row states (written down here: 3 to 3.25).
func TestSpecSilenceIsThePingTimeoutRow(t *testing.T) {
	if got := SpecSilence(t).String(); got != "3 to 3.25" {
		t.Errorf("docs/spec.md's silence range %q, want 3 to 3.25", got)
	}
}

// TestParseConstants: typed, untyped and number constants of a package are
// read with their type and value; a constant without a literal value is an
// error, so a test cannot miss it.
func TestParseConstants(t *testing.T) {
	dir := t.TempDir()
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "c.go"), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("package c\ntype Reason string\nconst (\n\tReasonA Reason = \"a\"\n\tHeader = `X-H`\n\tN = 3\n)\n")
	got, err := ParseConstants(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Const{{"ReasonA", "Reason", "a", "internal/contract/c.go"}, {"Header", "", "X-H", "internal/contract/c.go"}}
	if !slices.Equal(got, want) {
		t.Errorf("constants %+v, want %+v", got, want)
	}
	write("package c\ntype Reason string\nconst ReasonA Reason = \"a\"\nconst ReasonB = ReasonA\n")
	if _, err := ParseConstants(dir); err == nil || !strings.Contains(err.Error(), "ReasonB is not a literal") {
		t.Errorf("error %v, want ReasonB is not a literal", err)
	}
}

// TestConstantsReadsTheContract: the real contract has the deny reason,
// close reason and result kinds of Reason (a parser that stops finding a
// kind fails here, not silently in the tests that use it).
func TestConstantsReadsTheContract(t *testing.T) {
	kinds := map[string]int{}
	for _, c := range Constants(t, "Reason") {
		for _, k := range []string{"Reason", "Close", "Result"} {
			if strings.HasPrefix(c.Name, k) {
				kinds[k]++
			}
		}
		if c.Name == "ReasonNotWebSocket" && c.Value != "not_websocket" {
			t.Errorf("ReasonNotWebSocket = %q, want not_websocket", c.Value)
		}
	}
	for _, k := range []string{"Reason", "Close", "Result"} {
		if kinds[k] == 0 {
			t.Errorf("no %s* constant of type Reason found", k)
		}
	}
}

// TestGRPCCodes: the sentence on status.code maps each HTTP status to its
// gRPC name, over a line break; a status named twice differently or a
// missing sentence is an error.
func TestGRPCCodes(t *testing.T) {
	got, err := parseGRPCCodes("extauthz sets `status.code` to\n  `INVALID_ARGUMENT` (400) or `UNAVAILABLE` (503); `X` (404) is elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[int]string{400: "INVALID_ARGUMENT", 503: "UNAVAILABLE"}; !maps.Equal(got, want) {
		t.Errorf("codes %v, want %v", got, want)
	}
	if _, err := parseGRPCCodes("sets `status.code` to `A` (400) or `B` (400);"); err == nil {
		t.Error("two codes for 400: no error")
	}
	if _, err := parseGRPCCodes("no such sentence"); err == nil {
		t.Error("no sentence: no error")
	}
	if got := GRPCCodes(t)[403]; got != "PERMISSION_DENIED" {
		t.Errorf("docs/spec.md's code for 403 %q, want PERMISSION_DENIED", got)
	}
}

// TestCodeTables: every table headed "code" is found with its section's
// anchor, other tables are passed over, and a malformed code table is an
// error.
func TestCodeTables(t *testing.T) {
	text := sample + "| name | x |\n|---|---|\n| `n` | 1 |\n\n<a id=\"more\"></a>\n| code | meaning |\n|---|---|\n| `gamma` | g |\n"
	tbs, err := Parse("sample.md", text).parseCodeTables()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tb := range tbs {
		got = append(got, tb.Anchor+":"+strings.Join(tb.Codes(), ","))
	}
	if want := []string{"codes:alpha,beta", "more:gamma"}; !slices.Equal(got, want) {
		t.Errorf("tables %q, want %q", got, want)
	}
	bad := strings.Replace(text, "| `gamma` | g |", "| `gamma` |", 1)
	if _, err := Parse("sample.md", bad).parseCodeTables(); err == nil || !strings.Contains(err.Error(), "1 cells, the header has 2") {
		t.Errorf("error %v, want one on the short gamma row", err)
	}
}
