package readme

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// binaries maps each README section (### `name`) to its package and the
// argument lists whose -h output lists its flags.
var binaries = []struct {
	name string
	pkg  string
	help [][]string
}{
	{"wirekube-extauthz", "./extauthz/cmd/wirekube-extauthz", [][]string{{"-h"}}},
	{"wirekube-bridge", "./bridge/cmd/wirekube-bridge", [][]string{{"-h"}}},
	{"wirekube-relay-probe", "./tools/cmd/wirekube-relay-probe", [][]string{{"-h"}}},
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

// section returns the README text under "### `name`" up to the next heading.
func section(readme, name string) string {
	start := strings.Index(readme, "### `"+name+"`")
	if start < 0 {
		return ""
	}
	rest := readme[start+1:]
	if end := regexp.MustCompile(`\n##`).FindStringIndex(rest); end != nil {
		rest = rest[:end[0]]
	}
	return rest
}

// rowFor finds the table row whose first cell names flag name.
func rowFor(sec, name string) string {
	for _, line := range strings.Split(sec, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || cells[0] != "" {
			continue
		}
		if first := cells[1]; strings.Contains(first, "`--"+name+"`") || strings.Contains(first, "`-"+name+"`") {
			return line
		}
	}
	return ""
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

func TestReadmeDocumentsEveryFlag(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
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
	for _, b := range binaries {
		t.Run(b.name, func(t *testing.T) {
			sec := section(string(readme), b.name)
			if sec == "" {
				t.Fatalf("README has no section ### `%s`", b.name)
			}
			var flags []flagDoc
			for _, h := range b.help {
				out, _ := exec.Command(filepath.Join(bin, b.name), h...).CombinedOutput()
				flags = append(flags, parseHelp(string(out))...)
			}
			if len(flags) == 0 {
				t.Fatalf("no flags parsed from %s -h", b.name)
			}
			for _, f := range flags {
				row := rowFor(sec, f.name)
				switch {
				case row == "":
					t.Errorf("README section %s lacks a row for --%s", b.name, f.name)
				case f.def != "" && !sameDefault(row, f.def):
					t.Errorf("README row for --%s does not show its default %q: %s", f.name, f.def, row)
				}
			}
		})
	}
}
