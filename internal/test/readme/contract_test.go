package readme

import (
	"cmp"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/test/contractdoc"
)

var readmeCodeRe = regexp.MustCompile("`([a-z0-9_]+)`")

// readmeContract returns README.md's contract section: from its
// <a id="contract"></a> to the next "## " heading after its own.
func readmeContract(t *testing.T) string {
	t.Helper()
	readme := contractdoc.Read(t, "README.md").Text()
	start := strings.Index(readme, `<a id="contract"></a>`)
	if start < 0 {
		t.Fatal(`README.md has no <a id="contract"></a> section`)
	}
	section := readme[start:]
	heading := strings.Index(section, "\n## ") + 1 // the section's own heading
	if end := strings.Index(section[heading:], "\n## "); end >= 0 {
		section = section[:heading+end]
	}
	return section
}

var (
	statusCell  = regexp.MustCompile(`^[45]\d\d$`)
	closeCellRe = regexp.MustCompile(`^close (1\d{3})$|^no close frame$`)
)

// readmeAnswers reads the first column of the contract section's table
// whose first header cell is "answer": HTTP statuses ("403") and close
// codes ("close 1008", "no close frame" as 0).
func readmeAnswers(t *testing.T, section string) (statuses, closes []string) {
	t.Helper()
	in := false
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			in = false
			continue
		}
		cells := contractdoc.SplitRow(line)
		switch {
		case cells[0] == "answer":
			in = true
		case !in || strings.HasPrefix(cells[0], "---"):
		case statusCell.MatchString(cells[0]):
			statuses = append(statuses, cells[0])
		case closeCellRe.MatchString(cells[0]):
			m := closeCellRe.FindStringSubmatch(cells[0])
			closes = append(closes, cmp.Or(m[1], "none"))
		default:
			t.Errorf("README.md contract table: first cell %q is neither a status nor \"close NNNN\" nor \"no close frame\"", cells[0])
		}
	}
	if len(statuses) == 0 || len(closes) == 0 {
		t.Fatal("README.md: no answer table (first header cell \"answer\") with statuses and close codes in the contract section")
	}
	return statuses, closes
}

// closeName is a close code as readmeAnswers gives it ("none": no frame).
func closeName(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// TestReadmeContractNamesEveryAnswer: the README's short contract table
// has a row for every HTTP status of docs/spec.md's deny reasons and every
// close code of its close reasons, and no other; every reason code the
// section names is a code of docs/spec.md.
func TestReadmeContractNamesEveryAnswer(t *testing.T) {
	section := readmeContract(t)
	gotStatus, gotClose := readmeAnswers(t, section)
	specCodes := map[string]bool{}
	var wantStatus, wantClose []string
	for _, r := range parseSpecTables(t) {
		specCodes[r.code] = true
		switch r.anchor {
		case "deny-reasons":
			wantStatus = append(wantStatus, r.status)
		case "close-reasons":
			for _, n := range parseCloseCell(r.close) {
				wantClose = append(wantClose, closeName(n))
			}
		}
	}
	same := func(what string, got, want []string) {
		slices.Sort(got)
		got = slices.Compact(got)
		slices.Sort(want)
		want = slices.Compact(want)
		if !slices.Equal(got, want) {
			t.Errorf("README.md's contract table lists the %s %v, docs/spec.md's tables %v", what, got, want)
		}
	}
	same("statuses", gotStatus, wantStatus)
	same("close codes", gotClose, wantClose)
	for _, m := range readmeCodeRe.FindAllStringSubmatch(section, -1) {
		if !specCodes[m[1]] {
			t.Errorf("README.md's contract section names `%s`, which is no code of docs/spec.md", m[1])
		}
	}
}

// TestSpecRevocationReasonsAreTheBridgesRevokedCloses: the deny reasons
// docs/spec.md says a revoked session closes with are exactly the deny
// reasons (Reason* constants) the bridge sends in a 1008 close and that
// are no close reason of their own (#close-reasons).
func TestSpecRevocationReasonsAreTheBridgesRevokedCloses(t *testing.T) {
	root := repoRoot(t)
	closeRow := map[string]bool{}
	for _, r := range parseSpecTables(t) {
		if r.anchor == "close-reasons" {
			closeRow[r.code] = true
		}
	}
	sent := map[string]bool{}
	for _, c := range scanCodes(t, root) {
		if strings.HasPrefix(bareName(c.name), "Reason") && slices.Contains(c.closeCodes, 1008) && !closeRow[c.value] {
			sent[c.value] = true
		}
	}
	if len(sent) < 5 {
		t.Fatalf("found only %d deny reasons the bridge closes with: the scanner is broken", len(sent))
	}
	doc := specRevocationReasons(t)
	for code := range sent {
		if !doc[code] {
			t.Errorf("the bridge closes a revoked session with 1008 `%s`; %s's paragraph on revoked sessions does not name it",
				code, specPath)
		}
	}
	for code := range doc {
		if !sent[code] {
			t.Errorf("%s says a revoked session closes with `%s`; no closeWith(1008, %s) in bridge/ sends it", specPath, code, code)
		}
	}
}

// specRevocationReasons reads the deny reasons docs/spec.md says a revoked
// session closes with: the paragraph below the close-reasons table, "A
// session extauthz revokes ... closes with 1008 and that rule's deny reason:
// `pod_not_found`, ... ([docs/revocation.md](revocation.md))".
func specRevocationReasons(t *testing.T) map[string]bool {
	t.Helper()
	para := contractdoc.Spec(t).ParagraphAfter(t, "close-reasons")
	if !strings.HasPrefix(para, "A session extauthz revokes") {
		t.Fatalf("%s: no paragraph on the close reasons of a revoked session below #close-reasons: %.200q", specPath, para)
	}
	para, _, ok := strings.Cut(para, "([docs/revocation.md]")
	if !ok || !strings.Contains(para, "closes with 1008") {
		t.Fatalf("%s: the revocation paragraph changed shape: %.200q", specPath, para)
	}
	out := map[string]bool{}
	for _, m := range readmeCodeRe.FindAllStringSubmatch(para, -1) {
		out[m[1]] = true
	}
	if len(out) == 0 {
		t.Fatalf("%s: no deny reasons in the revocation paragraph", specPath)
	}
	return out
}
