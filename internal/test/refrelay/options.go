package refrelay

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of the real relay (docs/spec.md#raw-relay).
const (
	DefaultQueueDepth        = 256
	DefaultWriteStallTimeout = 2 * time.Second
)

// ControlRefusedText is the body of the Error frame that answers a control
// first frame (0x10, 0x11, 0x13). The fixture implements no forwarder.
const ControlRefusedText = "control session refused by reference relay"

// Options configure a Server. The zero value is the real relay's behaviour.
type Options struct {
	// QueueDepth is the number of frames queued per destination before the
	// newest is dropped. Zero means DefaultQueueDepth (256).
	QueueDepth int
	// WriteStallTimeout is how long one write to a peer may block before the
	// peer is disconnected. Zero means DefaultWriteStallTimeout (2 s). Tests
	// shorten it; a very short value disconnects healthy but busy readers.
	WriteStallTimeout time.Duration
	// Logger receives one line per session start and end, and one per
	// unknown frame. Nil discards. Keys are logged only as fingerprints.
	Logger *slog.Logger
	// DisableUDP skips the UDP socket the real relay opens next to its TCP
	// listener. Zero value: the socket is opened (best effort, see Serve).
	DisableUDP bool
}

// ErrOptions is wrapped by every Validate error.
var ErrOptions = errors.New("refrelay: invalid options")

// Validate reports options that cannot work.
func (o Options) Validate() error {
	if o.QueueDepth < 0 {
		return fmt.Errorf("%w: queue depth %d is negative", ErrOptions, o.QueueDepth)
	}
	if o.WriteStallTimeout < 0 {
		return fmt.Errorf("%w: write stall timeout %s is negative", ErrOptions, o.WriteStallTimeout)
	}
	return nil
}

// config is Options with every default filled in.
type config struct {
	queueDepth int
	stall      time.Duration
	log        *slog.Logger
	udp        bool
}

// complete validates o and fills in the defaults.
func (o Options) complete() (config, error) {
	if err := o.Validate(); err != nil {
		return config{}, err
	}
	c := config{queueDepth: o.QueueDepth, stall: o.WriteStallTimeout, log: o.Logger, udp: !o.DisableUDP}
	if c.queueDepth == 0 {
		c.queueDepth = DefaultQueueDepth
	}
	if c.stall == 0 {
		c.stall = DefaultWriteStallTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
