package readme

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// binaries are the binaries whose flags the documents list, with the
// argument lists whose -h output lists their flags.
var binaries = []struct {
	name string
	pkg  string
	help [][]string
}{
	{"wirekube-extauthz", "./extauthz/cmd/wirekube-extauthz", [][]string{{"-h"}}},
	{"wirekube-bridge", "./bridge/cmd/wirekube-bridge", [][]string{{"-h"}}},
	{"wirekube-relay-probe", "./tools/cmd/wirekube-relay-probe", [][]string{{"-h"}, {"sessions", "-h"}}},
	{"wirekube-relay-token", "./tools/cmd/wirekube-relay-token",
		[][]string{{"issue", "-h"}, {"list", "-h"}, {"revoke", "-h"}}},
	{"wirekube-refrelay", "./internal/test/refrelay/cmd/wirekube-refrelay", [][]string{{"-h"}}},
	{"wirekube-demo", "./demo/cmd/wirekube-demo", [][]string{{"-h"}}},
}

type flagDoc struct{ name, def string }

var (
	flagLine = regexp.MustCompile(`^  -([a-zA-Z0-9-]+)`)
	// Only the forms the flag package prints: (default "x") or (default x)
	// with no space in x. Free text after "default" is not a value.
	defaultRe = regexp.MustCompile(`\(default (?:"([^"]*)"|([^\s()]+))\)\s*$`)
)

// parseHelp reads flag.PrintDefaults output.
func parseHelp(out string) []flagDoc {
	var docs []flagDoc
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if m := flagLine.FindStringSubmatch(line); m != nil {
			docs = append(docs, flagDoc{name: m[1]})
			line = strings.TrimPrefix(line, m[0])
		}
		if len(docs) == 0 {
			continue
		}
		if m := defaultRe.FindStringSubmatch(line); m != nil {
			docs[len(docs)-1].def = m[1] + m[2]
		}
	}
	return docs
}

func TestParseHelp(t *testing.T) {
	got := parseHelp("Usage:\n  -a string\n    \tthe a (default \"x y\")\n  -b duration\n    \twait (default 1h0m0s)\n" +
		"  -c\tflag\n  -d value\n    \tlist (default empty: any is refused)\n")
	want := []flagDoc{{"a", "x y"}, {"b", "1h0m0s"}, {"c", ""}, {"d", ""}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("flag %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

// between returns the text of page from the line starting with from up to
// the next line starting with to ("" for either: the page's start or end).
func between(page, from, to string) (string, bool) {
	start := 0
	if from != "" {
		i := strings.Index("\n"+page, "\n"+from)
		if i < 0 {
			return "", false
		}
		start = i
	}
	rest := page[start:]
	if to != "" {
		if i := strings.Index(rest[1:], "\n"+to); i >= 0 {
			rest = rest[:i+1]
		}
	}
	return rest, true
}

// rowsFor finds the table rows whose first cell names flag name.
func rowsFor(sec, name string) []string {
	var rows []string
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || cells[0] != "" {
			continue
		}
		if first := cells[1]; strings.Contains(first, "`--"+name+"`") || strings.Contains(first, "`-"+name+"`") {
			rows = append(rows, line)
		}
	}
	return rows
}

// sameDefault accepts the README's spelling of a duration ("1h" for 1h0m0s).
func sameDefault(row, def string) bool {
	if strings.Contains(row, "`"+def+"`") {
		return true
	}
	want, err := time.ParseDuration(def)
	if err != nil {
		return false
	}
	for _, cell := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(row, -1) {
		if d, err := time.ParseDuration(cell[1]); err == nil && d == want {
			return true
		}
	}
	return false
}

// binaryFlags builds the binaries and returns the flags each one's -h
// lists, by binary name.
func binaryFlags(t *testing.T, root string) map[string][]flagDoc {
	t.Helper()
	bin := t.TempDir()
	args := []string{"build", "-o", bin + string(filepath.Separator)}
	for _, b := range binaries {
		args = append(args, b.pkg)
	}
	build := exec.Command("go", args...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	all := map[string][]flagDoc{}
	for _, b := range binaries {
		for _, h := range b.help {
			out, _ := exec.Command(filepath.Join(bin, b.name), h...).CombinedOutput()
			all[b.name] = append(all[b.name], parseHelp(string(out))...)
		}
		if len(all[b.name]) == 0 {
			t.Fatalf("no flags parsed from %s -h", b.name)
		}
	}
	return all
}

// docPages are the one place each binary's flags are listed: every flag
// has a row showing its default in that part of the page, and every flag
// row there names a flag of the binary. from and to delimit the part (the
// lines they start; empty: the whole page).
var docPages = []struct{ page, from, to, binary string }{
	{"docs/extauthz.md", "", "", "wirekube-extauthz"},
	{"docs/bridge.md", "", "", "wirekube-bridge"},
	{"docs/tools.md", "## `wirekube-relay-probe`", "## `wirekube-relay-token`", "wirekube-relay-probe"},
	{"docs/tools.md", "## `wirekube-relay-token`", "## Tests", "wirekube-relay-token"},
	{"docs/refrelay.md", "", "", "wirekube-refrelay"},
	{"docs/demo.md", "", "", "wirekube-demo"},
}

// TestDocsFlagTablesMatchTheFlagSets: each binary's document lists every
// flag of the binary with its default, and no flag it does not have.
func TestDocsFlagTablesMatchTheFlagSets(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	all := binaryFlags(t, root)
	covered := map[string]bool{}
	for _, d := range docPages {
		covered[d.binary] = true
		t.Run(d.binary, func(t *testing.T) {
			page, err := os.ReadFile(filepath.Join(root, d.page))
			if err != nil {
				t.Fatal(err)
			}
			part, ok := between(string(page), d.from, d.to)
			if !ok {
				t.Fatalf("%s has no line starting %q", d.page, d.from)
			}
			checkFlagRows(t, d.page+" ("+d.binary+")", part, all[d.binary])
		})
	}
	for _, b := range binaries {
		if !covered[b.name] {
			t.Errorf("%s has no document listing its flags in docPages", b.name)
		}
	}
}

// flagRow is a table row whose first cell is a flag: | `--name` | ...
var flagRow = regexp.MustCompile("(?m)^\\| `--?([a-zA-Z0-9-]+)`")

// checkFlagRows holds the rows of text to flags both ways: a row with its
// default for each flag (a flag two commands define with two defaults,
// such as the probe's --timeout, needs a row for each), and a flag for each
// flag row.
func checkFlagRows(t *testing.T, where, text string, flags []flagDoc) {
	t.Helper()
	known := map[string]bool{}
	for _, f := range flags {
		known[f.name] = true
		rows := rowsFor(text, f.name)
		switch {
		case len(rows) == 0:
			t.Errorf("%s lacks a row for --%s", where, f.name)
		case f.def != "" && !slices.ContainsFunc(rows, func(r string) bool { return sameDefault(r, f.def) }):
			t.Errorf("%s: no row for --%s shows its default %q: %s", where, f.name, f.def, strings.Join(rows, "\n"))
		}
	}
	for _, m := range flagRow.FindAllStringSubmatch(text, -1) {
		if !known[m[1]] {
			t.Errorf("%s has a row for --%s, which is no flag", where, m[1])
		}
	}
}
