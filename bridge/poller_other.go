//go:build !linux

package bridge

import "errors"

// poller is Linux only (epoll); elsewhere readers keep their goroutine
// while idle.
type poller struct{}

const pollerSupported = false

func newPoller() (*poller, error) { return nil, errors.New("bridge: no poller on this platform") }

func (p *poller) arm(*session, int, int) error { return errors.New("bridge: no poller") }
func (p *poller) forget(*session)              {}
func (p *poller) close()                       {}
