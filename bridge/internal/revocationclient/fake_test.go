package revocationclient

import (
	"sync"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
)

// fakeSession is a Session admitted at admitted whose token expires at
// expires; it records every CloseFor and, as a real session, ends once.
type fakeSession struct {
	admitted time.Time
	expires  time.Time

	mu     sync.Mutex
	closes []string // "cause reason" of each CloseFor, in order
}

func (f *fakeSession) Binding() string         { return "" }
func (f *fakeSession) Admitted() time.Time     { return f.admitted }
func (f *fakeSession) TokenExpires() time.Time { return f.expires }

func (f *fakeSession) CloseFor(cause string, reason contract.Reason) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closes = append(f.closes, cause+" "+string(reason))
	return len(f.closes) == 1
}

func (f *fakeSession) closed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.closes...)
}
