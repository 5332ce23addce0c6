// Package timeouts holds docs/timeouts.md to the files the project ships:
// every idle timeout the page lists with a shipped value is in that file
// with that value, and none of them is shorter than the agent needs.
package timeouts

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// minIdle is the shortest idle timeout the page may ship: 2.4 times the
// agent's 25 s keepalive, so a lost keepalive or a late ping is no cut.
const minIdle = 60 * time.Second

// notSessionIdle are settings the page lists that never apply to an
// upgraded session (they end before the upgrade), so minIdle does not.
var notSessionIdle = map[string]bool{"request_headers_timeout": true}

type row struct{ file, setting, shipped string }

var code = regexp.MustCompile("`([^`]+)`")

// rows reads the table of docs/timeouts.md: the rows whose file cell names
// a file of the repository.
func rows(t *testing.T, root string) []row {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "timeouts.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []row
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 8 || !strings.HasPrefix(strings.TrimSpace(cells[2]), "`") {
			continue
		}
		file := firstCode(cells[2])
		if _, err := os.Stat(filepath.Join(root, file)); err != nil {
			continue // a flag, not a file (the bridge row)
		}
		shipped := firstCode(cells[6])
		if strings.TrimSpace(cells[6]) == "not set" {
			shipped = ""
		}
		out = append(out, row{file: file, setting: firstCode(cells[3]), shipped: shipped})
	}
	return out
}

func firstCode(cell string) string {
	if m := code.FindStringSubmatch(cell); m != nil {
		return m[1]
	}
	return ""
}

// seconds reads a shipped value: a Go/Envoy duration ("300s") or a bare
// number of seconds, quoted or not. Zero means no timeout.
func seconds(v string) (time.Duration, bool) {
	v = strings.Trim(v, `"`)
	if d, err := time.ParseDuration(v); err == nil {
		return d, true
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(n) * time.Second, true
	}
	return 0, false
}

// TestShippedIdleTimeouts: each row's value is the one in its file ("not
// set": the setting is absent), and each session idle timeout is none or
// at least minIdle.
func TestShippedIdleTimeouts(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	rs := rows(t, root)
	if len(rs) < 15 {
		t.Fatalf("docs/timeouts.md: %d rows with a shipped file, want the whole table (15)", len(rs))
	}
	for _, r := range rs {
		t.Run(r.file+"/"+r.setting, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(root, r.file))
			if err != nil {
				t.Fatal(err)
			}
			set := regexp.MustCompile(`(^|[^a-zA-Z_.-])` + regexp.QuoteMeta(r.setting) + `\b`)
			if r.shipped == "" {
				if set.Match(b) {
					t.Fatalf("the page says %s is not set in %s, but it is", r.setting, r.file)
				}
				return
			}
			val := regexp.MustCompile(`(?m)(^|[^a-zA-Z_.-])` + regexp.QuoteMeta(r.setting) + `["':= ]*` + regexp.QuoteMeta(r.shipped) + `\s*;?\s*$`)
			if !val.Match(b) {
				t.Fatalf("%s has no line setting %s to %s, as docs/timeouts.md says", r.file, r.setting, r.shipped)
			}
			d, ok := seconds(r.shipped)
			if !ok {
				t.Fatalf("shipped value %q is no duration", r.shipped)
			}
			if d != 0 && d < minIdle && !notSessionIdle[r.setting] {
				t.Errorf("%s %s = %s: shorter than %s (the agent's keepalive is 25 s, the bridge pings every 20 s)", r.file, r.setting, d, minIdle)
			}
		})
	}
}
