// Package promql finds the metric names a PromQL expression reads, so that
// tests can hold alerts and dashboards to the metrics the binaries really
// export. It is a lexer, not a full parser: it knows PromQL's strings,
// label matchers, grouping clauses, range and subquery brackets, offsets,
// numbers and durations, keywords, aggregation operators and function
// calls; every other identifier is a metric name. It does not validate the
// expression.
package promql

import (
	"fmt"
	"slices"
	"strings"
)

// keywords are PromQL words that are never metric names: binary set
// operators, modifiers and aggregation operators (which may be followed by
// a grouping clause rather than a parenthesis).
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
	"on": true, "ignoring": true, "group_left": true, "group_right": true, "atan2": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true, "inf": true, "nan": true,
}

// grouping are the keywords followed by a parenthesised list of label names.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
	"group_left": true, "group_right": true}

// MetricNames returns the sorted, distinct metric names expr reads.
func MetricNames(expr string) ([]string, error) {
	var names []string
	l := lexer{s: expr}
	for {
		tok, err := l.next()
		if err != nil {
			return nil, fmt.Errorf("promql: %q: %w", expr, err)
		}
		if tok == "" {
			break
		}
		if !isIdentStart(tok[0]) || keywords[strings.ToLower(tok)] {
			if grouping[strings.ToLower(tok)] {
				if err := l.skipLabelList(); err != nil {
					return nil, fmt.Errorf("promql: %q: %w", expr, err)
				}
			}
			continue
		}
		if l.peekNonSpace() == '(' { // a function call
			continue
		}
		names = append(names, tok)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

type lexer struct {
	s string
	i int
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func (l *lexer) peekNonSpace() byte {
	for j := l.i; j < len(l.s); j++ {
		if !strings.ContainsRune(" \t\r\n", rune(l.s[j])) {
			return l.s[j]
		}
	}
	return 0
}

// next returns the next identifier or a one-character punctuation token,
// skipping whitespace, comments, strings, label matchers ({...}), brackets
// ([...]) and numbers; "" at the end.
func (l *lexer) next() (string, error) {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case strings.ContainsRune(" \t\r\n", rune(c)):
			l.i++
		case c == '#':
			for l.i < len(l.s) && l.s[l.i] != '\n' {
				l.i++
			}
		case c == '"' || c == '\'' || c == '`':
			if err := l.skipString(c); err != nil {
				return "", err
			}
		case c == '{':
			if err := l.skipUntil('}'); err != nil {
				return "", err
			}
		case c == '[':
			if err := l.skipUntil(']'); err != nil {
				return "", err
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration (5m, 1h30m, 1e3, 0x1f): all of its
			// characters are identifier characters or '.'.
			for l.i < len(l.s) && (isIdent(l.s[l.i]) || l.s[l.i] == '.') {
				l.i++
			}
		case isIdentStart(c):
			j := l.i
			for l.i < len(l.s) && isIdent(l.s[l.i]) {
				l.i++
			}
			return l.s[j:l.i], nil
		default:
			l.i++
			return string(c), nil
		}
	}
	return "", nil
}

func (l *lexer) skipString(q byte) error {
	for l.i++; l.i < len(l.s); l.i++ {
		switch l.s[l.i] {
		case '\\':
			if q != '`' {
				l.i++
			}
		case q:
			l.i++
			return nil
		}
	}
	return fmt.Errorf("unterminated string")
}

// skipUntil skips a bracketed section (matchers or a range), strings
// inside it included.
func (l *lexer) skipUntil(end byte) error {
	for l.i++; l.i < len(l.s); {
		switch c := l.s[l.i]; {
		case c == '"' || c == '\'' || c == '`':
			if err := l.skipString(c); err != nil {
				return err
			}
		case c == end:
			l.i++
			return nil
		default:
			l.i++
		}
	}
	return fmt.Errorf("unterminated %q", end)
}

// skipLabelList skips the "(label, ...)" after a grouping keyword, if any.
func (l *lexer) skipLabelList() error {
	if l.peekNonSpace() != '(' {
		return nil
	}
	l.i = strings.IndexByte(l.s[l.i:], '(') + l.i
	return l.skipUntil(')')
}
