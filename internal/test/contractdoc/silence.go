package contractdoc

import (
	"regexp"
	"strconv"
	"testing"
)

// silenceRe matches "3 to 3.25 `--ping-interval`s" and its variants in the
// documents and the flag help.
var silenceRe = regexp.MustCompile("([0-9]+(?:\\.[0-9]+)?) to ([0-9]+(?:\\.[0-9]+)?) (?:`--ping-interval`s|periods|intervals)")

// Silence is a silence range in ping intervals, as a document states it.
type Silence struct {
	Text   string // the words matched, for messages
	Lo, Hi string // the numbers as written
}

// Floats is the range as numbers.
func (s Silence) Floats() (lo, hi float64) {
	lo, _ = strconv.ParseFloat(s.Lo, 64)
	hi, _ = strconv.ParseFloat(s.Hi, 64)
	return lo, hi
}

// String is "lo to hi".
func (s Silence) String() string { return s.Lo + " to " + s.Hi }

// Silences returns every silence range text states.
func Silences(text string) []Silence {
	var out []Silence
	for _, m := range silenceRe.FindAllStringSubmatch(text, -1) {
		out = append(out, Silence{Text: m[0], Lo: m[1], Hi: m[2]})
	}
	return out
}

// SpecSilence is the silence range of docs/spec.md's ping_timeout row
// (#close-reasons).
func SpecSilence(t testing.TB) Silence {
	t.Helper()
	for _, r := range Spec(t).Table(t, "close-reasons").Rows {
		if r.Code() != "ping_timeout" {
			continue
		}
		s := Silences(r.Cell("when"))
		if len(s) != 1 {
			t.Fatalf("%s:%d: the ping_timeout row states %d silence ranges, want one", SpecPath, r.Line, len(s))
		}
		return s[0]
	}
	t.Fatalf("%s#close-reasons: no ping_timeout row", SpecPath)
	return Silence{}
}
