package sessionlist

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/wirekube/relay-ws/internal/contract"
)

// listQuery is a parsed listing query.
type listQuery struct {
	limit int    // page size, 1..contract.SessionsLimitMax
	after uint64 // list sessions with a larger seq only
	peer  string // only this WireKubePeer; empty: every peer
}

// parseListQuery parses the raw query of a listing request (untrusted
// bytes): limit, after
// and peer, each at most once, nothing else. The errors name the parameter
// and quote the value (%q escapes it).
func parseListQuery(raw string) (listQuery, error) {
	q := listQuery{limit: contract.SessionsLimitDefault}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return listQuery{}, fmt.Errorf("query: %w", err)
	}
	for name, v := range vals {
		if len(v) > 1 {
			return listQuery{}, fmt.Errorf("%s: given %d times, want at most once", name, len(v))
		}
		if err := q.set(name, v[0]); err != nil {
			return listQuery{}, err
		}
	}
	return q, nil
}

func (q *listQuery) set(name, v string) error {
	switch name {
	case "limit":
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > contract.SessionsLimitMax {
			return fmt.Errorf("limit: want an integer from 1 to %d, got %q", contract.SessionsLimitMax, v)
		}
		q.limit = n
	case "after":
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("after: want a session id (the next cursor of a page), got %q", v)
		}
		q.after = n
	case "peer":
		if !contract.PrintableHeaderValue(v) {
			return fmt.Errorf("peer: want a WireKubePeer name (printable, no spaces, at most %d bytes), got %q", contract.MaxHeaderValue, v)
		}
		q.peer = v
	default:
		return fmt.Errorf("%q: unknown parameter (want limit, after, peer)", name)
	}
	return nil
}
