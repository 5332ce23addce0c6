package bridge

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/wirekube/relay-ws/internal/test/contractdoc"
	"github.com/wirekube/relay-ws/relayproto"
)

// TestSilenceLimitMatchesTheSpec: a registered client whose last frame
// came at any point of a quarter interval is closed after a silence within
// docs/spec.md's ping_timeout range, and both ends of the range are met
// (the longest silence is the upper bound, the shortest is within a
// nanosecond of the lower), so the spec is exact, not only true. In
// synctest bubbles, one per moment of the last frame.
func TestSilenceLimitMatchesTheSpec(t *testing.T) {
	lo, hi := contractdoc.SpecSilence(t).Floats()
	const interval = 40 * time.Millisecond
	in := func(n float64) time.Duration { return time.Duration(n * float64(interval)) }
	var silences []time.Duration
	for _, at := range []time.Duration{0, interval / 8, interval/4 - 1, interval / 4, interval/2 - 1, interval / 2, interval} {
		t.Run(fmt.Sprint("last frame at ", at), func(t *testing.T) {
			d := silenceUntilClosed(t, interval, at)
			if d < in(lo) || d > in(hi) {
				t.Errorf("closed after %s of silence, docs/spec.md says %g to %g intervals (%s to %s)", d, lo, hi, in(lo), in(hi))
			}
			silences = append(silences, d)
		})
	}
	if longest := slices.Max(silences); longest != in(hi) {
		t.Errorf("longest silence %s, docs/spec.md says up to %s", longest, in(hi))
	}
	if shortest := slices.Min(silences); shortest > in(lo)+time.Nanosecond {
		t.Errorf("shortest silence %s, docs/spec.md says from %s", shortest, in(lo))
	}
}

// silenceUntilClosed registers a client that never answers a ping, sends
// one Keepalive at after the Register (none if after is 0), and returns how
// long after its last frame the bridge closed the connection.
func silenceUntilClosed(t *testing.T, interval, after time.Duration) time.Duration {
	t.Helper()
	var silence time.Duration
	synctest.Test(t, func(t *testing.T) {
		b := startBubble(t, func(o *Options) { o.PingInterval = interval })
		ws, relayEnd := b.register(t, testKey(1))
		last := time.Now()
		go func() { _, _ = io.Copy(io.Discard, relayEnd) }() // until the bridge closes it
		ws.SetPingHandler(func(string) error { return nil }) // and never answer
		closed := make(chan struct{})
		go func() {
			defer close(closed)
			for {
				if _, _, err := ws.ReadMessage(); err != nil {
					return
				}
			}
		}()
		if after > 0 {
			time.Sleep(after)
			send(t, ws, relayproto.AppendFrame(nil, relayproto.TypeKeepalive))
			last = time.Now()
		}
		<-closed
		silence = time.Since(last)
	})
	return silence
}

// TestSilenceRangeSameEverywhere: docs/bridge.md, docs/spec.md and the
// --ping-interval help state the silence range of docs/spec.md, and no
// document (the README, any page of docs/) states another.
func TestSilenceRangeSameEverywhere(t *testing.T) {
	want := contractdoc.SpecSilence(t).String()
	var fs flag.FlagSet
	o := DefaultOptions()
	o.AddFlags(&fs)
	texts := map[string]string{"--ping-interval help": fs.Lookup("ping-interval").Usage}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append(docs, "../README.md") {
		src, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		texts[doc] = string(src)
	}
	for name, text := range texts {
		found := contractdoc.Silences(text)
		if len(found) == 0 && (name == "--ping-interval help" || name == "../docs/bridge.md" || name == "../docs/spec.md") {
			t.Errorf("%s states no silence range for ping_timeout", name)
		}
		for _, s := range found {
			if s.String() != want {
				t.Errorf("%s: %q, docs/spec.md says %s", name, s.Text, want)
			}
		}
	}
}

// numberWords are the counts bridge/doc.go may spell out.
var numberWords = map[string]int{"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}

// TestDocTimersMatchTheSession: bridge/doc.go's "N timers (a, b, c)" per
// session names as many timers as the session struct has fields set from
// time.AfterFunc or time.NewTimer anywhere in the package.
func TestDocTimersMatchTheSession(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(\w+)\s+timers\s+\(([^)]*)\)`).FindStringSubmatch(strings.ReplaceAll(string(doc), "\n//", ""))
	if m == nil {
		t.Fatal("bridge/doc.go names no per-session timers")
	}
	n, ok := numberWords[m[1]]
	if !ok {
		t.Fatalf("bridge/doc.go: %q timers", m[1])
	}
	if listed := len(strings.Split(m[2], ",")); listed != n {
		t.Errorf("bridge/doc.go says %s timers and lists %d: (%s)", m[1], listed, m[2])
	}
	if got := sessionTimerFields(t); len(got) != n {
		t.Errorf("bridge/doc.go says %s timers per session, the session has %d: %v", m[1], len(got), got)
	}
}

// sessionTimerFields are the fields of the session struct that the
// package's non-test files assign a time.AfterFunc or time.NewTimer to.
func sessionTimerFields(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	fields := map[string]bool{}
	var parsed []*ast.File
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, f)
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || ts.Name.Name != "session" {
				return true
			}
			for _, fl := range ts.Type.(*ast.StructType).Fields.List {
				for _, name := range fl.Names {
					fields[name.Name] = false
				}
			}
			return false
		})
	}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			as, ok := n.(*ast.AssignStmt)
			if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
				return true
			}
			sel, ok := as.Lhs[0].(*ast.SelectorExpr)
			call, isCall := as.Rhs[0].(*ast.CallExpr)
			if !ok || !isCall {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, isIdent := fn.X.(*ast.Ident); isIdent && pkg.Name == "time" &&
				(fn.Sel.Name == "AfterFunc" || fn.Sel.Name == "NewTimer") {
				if _, isField := fields[sel.Sel.Name]; isField {
					fields[sel.Sel.Name] = true
				}
			}
			return true
		})
	}
	var timers []string
	for name, timer := range fields {
		if timer {
			timers = append(timers, name)
		}
	}
	slices.Sort(timers)
	return timers
}
