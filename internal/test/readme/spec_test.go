package readme

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/contractdoc"
)

// specPath is the document every code comment cites by anchor.
const specPath = "docs/spec.md"

// codeConst is one reason or result code found in the Go sources.
type codeConst struct {
	name  string // Go identifier, qualified when outside internal/contract
	value string
	file  string
	// closeCodes are the close codes the bridge sends with this code
	// (0: no close frame), from its closeWith calls.
	closeCodes []int
}

// docRow is one row of a code table in the spec.
type docRow struct {
	code   string
	anchor string // the section the table is in
	line   int
	status string // "HTTP" column, if the table has one
	close  string // "close" column, if the table has one
}

// wsCloseCodes maps gorilla/websocket's close code names to their values.
var wsCloseCodes = map[string]int{
	"CloseNormalClosure": 1000, "CloseGoingAway": 1001, "CloseProtocolError": 1002,
	"CloseUnsupportedData": 1003, "CloseNoStatusReceived": 1005, "CloseAbnormalClosure": 1006,
	"CloseInvalidFramePayloadData": 1007, "ClosePolicyViolation": 1008, "CloseMessageTooBig": 1009,
	"CloseMandatoryExtension": 1010, "CloseInternalServerErr": 1011, "CloseServiceRestart": 1012,
	"CloseTryAgainLater": 1013, "CloseTLSHandshake": 1015,
}

// notCodeTypes are named string types of internal/contract whose constants
// are not reason or result codes (none today).
var notCodeTypes = map[string]bool{}

func repoRoot(t *testing.T) string {
	t.Helper()
	return contractdoc.Root(t)
}

// TestSpecListsEveryCode keeps docs/spec.md and the Go code in step: every
// reason or result code declared in the code has a row in one of the
// spec's code tables, every row names a code the code declares, deny
// reasons carry Reason.HTTPStatus() and close reasons the codes the bridge
// sends with them.
func TestSpecListsEveryCode(t *testing.T) {
	root := repoRoot(t)
	codes := scanCodes(t, root)
	if len(codes) < 40 {
		t.Fatalf("found only %d codes in the Go sources: the scanner is broken", len(codes))
	}
	rows := parseSpecTables(t)
	if len(rows) < 40 {
		t.Fatalf("found only %d code rows in %s: the table parser is broken", len(rows), specPath)
	}
	byValue := map[string][]codeConst{}
	for _, c := range codes {
		byValue[c.value] = append(byValue[c.value], c)
	}
	docByCode := map[string][]docRow{}
	for _, r := range rows {
		docByCode[r.code] = append(docByCode[r.code], r)
		if _, ok := byValue[r.code]; !ok {
			t.Errorf("%s:%d lists `%s` (in #%s) but no Go constant has that value: remove the row, or declare the "+
				"code in internal/contract", specPath, r.line, r.code, r.anchor)
		}
	}
	for _, c := range codes {
		if len(docByCode[c.value]) == 0 {
			t.Errorf("%s (%q, %s) is not in %s: add the row\n\t%s\nto the table under <a id=%q>",
				c.name, c.value, c.file, specPath, suggestRow(c), suggestAnchor(c))
		}
	}
	checkStatuses(t, codes, rows)
	checkCloseCodes(t, codes, rows)
}

func suggestAnchor(c codeConst) string {
	switch {
	case strings.HasPrefix(bareName(c.name), "Reason"):
		return "deny-reasons"
	case slices.ContainsFunc(c.closeCodes, func(n int) bool { return n != 0 }) ||
		strings.HasPrefix(bareName(c.name), "Close"):
		return "close-reasons"
	case strings.Contains(c.file, "extauthz"):
		return "check-results"
	}
	return "results"
}

func suggestRow(c codeConst) string {
	switch suggestAnchor(c) {
	case "deny-reasons":
		return fmt.Sprintf("| `%s` | %d | extauthz or bridge | when ... |", c.value, contract.Reason(c.value).HTTPStatus())
	case "close-reasons":
		return fmt.Sprintf("| `%s` | %s | when ... |", c.value, closeCell(c.closeCodes))
	case "check-results":
		return fmt.Sprintf("| `%s` | where ... | meaning ... |", c.value)
	}
	return fmt.Sprintf("| `%s` | when ... |", c.value)
}

func closeCell(codes []int) string {
	if len(codes) == 0 {
		return "1008"
	}
	var s []string
	for _, n := range codes {
		if n == 0 {
			s = append(s, "none")
		} else {
			s = append(s, strconv.Itoa(n))
		}
	}
	return strings.Join(s, ", ")
}

func bareName(name string) string { return name[strings.LastIndex(name, ".")+1:] }

// checkStatuses compares the HTTP column of deny rows with HTTPStatus().
func checkStatuses(t *testing.T, codes []codeConst, rows []docRow) {
	t.Helper()
	deny := map[string]bool{}
	for _, c := range codes {
		if strings.HasPrefix(bareName(c.name), "Reason") {
			deny[c.value] = true
		}
	}
	for _, r := range rows {
		if r.status == "" {
			continue
		}
		want := contract.Reason(r.code).HTTPStatus()
		if !deny[r.code] {
			t.Errorf("%s:%d: `%s` is in a table with an HTTP column but is no Reason* constant in internal/contract",
				specPath, r.line, r.code)
		} else if r.status != strconv.Itoa(want) {
			t.Errorf("%s:%d: `%s` says HTTP %s, contract.Reason.HTTPStatus() answers %d: fix the row or HTTPStatus",
				specPath, r.line, r.code, r.status, want)
		}
	}
}

// checkCloseCodes compares the close column with the bridge's closeWith calls.
func checkCloseCodes(t *testing.T, codes []codeConst, rows []docRow) {
	t.Helper()
	sent := map[string][]int{}
	for _, c := range codes {
		sent[c.value] = append(sent[c.value], c.closeCodes...)
	}
	pairs := 0
	for _, r := range rows {
		if r.close == "" {
			continue
		}
		doc := parseCloseCell(r.close)
		for _, n := range sent[r.code] {
			pairs++
			if !slices.Contains(doc, n) {
				t.Errorf("%s:%d: the bridge closes `%s` with %s, the row says %q: add it to the close column",
					specPath, r.line, r.code, closeCell([]int{n}), r.close)
			}
		}
		if len(sent[r.code]) == 0 {
			t.Errorf("%s:%d: `%s` is a close reason but no closeWith(code, %s) call in bridge/ sends it",
				specPath, r.line, r.code, r.code)
		}
	}
	if pairs < 10 {
		t.Fatalf("matched only %d closeWith calls in bridge/ to close rows: the scanner is broken", pairs)
	}
}

var closeNumber = regexp.MustCompile(`\b1\d{3}\b|\bnone\b`)

func parseCloseCell(cell string) []int {
	var out []int
	for _, m := range closeNumber.FindAllString(cell, -1) {
		n, _ := strconv.Atoi(m) // "none" -> 0
		out = append(out, n)
	}
	return out
}

// parseSpecTables reads every Markdown table of docs/spec.md whose first
// header cell is "code" (internal/test/contractdoc) and returns its rows
// with the anchor of the section above it.
func parseSpecTables(t *testing.T) []docRow {
	t.Helper()
	var rows []docRow
	for _, tb := range contractdoc.Spec(t).CodeTables(t) {
		for _, r := range tb.Rows {
			rows = append(rows, docRow{code: r.Code(), anchor: tb.Anchor, line: r.Line, status: r.Cell("HTTP"), close: r.Cell("close")})
		}
	}
	return rows
}

var (
	citationRe  = regexp.MustCompile(`spec\.md#([A-Za-z0-9_-]+)`)
	staleSpecRe = regexp.MustCompile(`\bSPEC (section |§ ?)?\d`)
)

// TestSpecCitations fails on a citation of a docs/spec.md anchor that does
// not exist, and on a citation of the out-of-tree "SPEC section N".
func TestSpecCitations(t *testing.T) {
	root := repoRoot(t)
	anchors := contractdoc.Spec(t).Anchors()
	cited := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !textFile(d.Name()) {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range citationRe.FindAllStringSubmatch(line, -1) {
				cited++
				if !anchors[m[1]] {
					t.Errorf("%s:%d cites %s#%s: no <a id=%q></a> in %s", rel, i+1, specPath, m[1], m[1], specPath)
				}
			}
			if staleSpecRe.MatchString(line) && rel != "internal/test/readme/spec_test.go" {
				t.Errorf("%s:%d cites %q, a document outside the repository: cite %s#<anchor> instead",
					rel, i+1, staleSpecRe.FindString(line), specPath)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 15 {
		t.Errorf("found only %d citations of %s: the scanner is broken or the comments lost them", cited, specPath)
	}
}

func textFile(name string) bool {
	switch filepath.Ext(name) {
	case ".go", ".md", ".yaml", ".yml", ".conf", ".json", ".txt", ".sh", ".tpl", ".caddyfile":
		return true
	}
	return name == "Makefile" || name == "Dockerfile" || name == "Caddyfile"
}
