package sessionlist

import (
	"strings"
	"testing"

	"github.com/wirekube/relay-ws/internal/contract"
)

var listQueryCases = []struct {
	name, raw string
	want      listQuery
	err       string // substring of the error; empty: no error
}{
	{"empty", "", listQuery{limit: 100}, ""},
	{"limit", "limit=7", listQuery{limit: 7}, ""},
	{"limit max", "limit=1000", listQuery{limit: 1000}, ""},
	{"after and peer", "after=42&peer=node-b", listQuery{limit: 100, after: 42, peer: "node-b"}, ""},
	{"escaped peer", "peer=node%2Da", listQuery{limit: 100, peer: "node-a"}, ""},
	{"limit zero", "limit=0", listQuery{}, "limit: want an integer from 1 to 1000"},
	{"limit above max", "limit=1001", listQuery{}, "limit: want an integer from 1 to 1000"},
	{"limit negative", "limit=-1", listQuery{}, "limit: want"},
	{"limit not a number", "limit=ten", listQuery{}, `got "ten"`},
	{"limit empty", "limit", listQuery{}, "limit: want"},
	{"after negative", "after=-3", listQuery{}, "after: want a session id"},
	{"after overflow", "after=18446744073709551616", listQuery{}, "after: want"},
	{"peer with space", "peer=node+a", listQuery{}, `peer: want a WireKubePeer name`},
	{"peer empty", "peer=", listQuery{}, "peer: want"},
	{"peer control byte escaped in error", "peer=%1b%5B31m", listQuery{}, `got "\x1b[31m"`},
	{"repeated", "limit=1&limit=2", listQuery{}, "limit: given 2 times"},
	{"unknown", "offset=3", listQuery{}, `"offset": unknown parameter`},
	{"bad escape", "peer=%zz", listQuery{}, "query: "},
	{"semicolon", "limit=1;after=2", listQuery{}, "query: "},
}

func TestParseListQuery(t *testing.T) {
	for _, tc := range listQueryCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseListQuery(tc.raw)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseListQuery(%q) = %+v, %v; want error containing %q", tc.raw, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseListQuery(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
			}
		})
	}
}

func FuzzParseListQuery(f *testing.F) {
	for _, tc := range listQueryCases {
		f.Add(tc.raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseListQuery(raw)
		if err != nil {
			return
		}
		if q.limit < 1 || q.limit > contract.SessionsLimitMax {
			t.Fatalf("parseListQuery(%q): limit %d out of bounds", raw, q.limit)
		}
		if q.peer != "" && !contract.PrintableHeaderValue(q.peer) {
			t.Fatalf("parseListQuery(%q): peer %q not printable", raw, q.peer)
		}
	})
}
