package bridge

import (
	"flag"
	"fmt"
)

// Who bounces a new session from a bridge past its full mark (bounce.go).
const (
	// BounceByBridge: the bridge draws for every verified new session
	// itself. The default, and the right one wherever extauthz does not
	// sit beside this bridge (a front that balances extauthz and the
	// bridges separately).
	BounceByBridge = "bridge"
	// BounceByAuthz: extauthz in the same Pod reads this bridge's room
	// (GET /room) and bounces before it spends a TokenReview; the bridge
	// draws nothing itself and only answers extauthz's bounce answers.
	BounceByAuthz = "authz"
	// BounceOff: no draw; only extauthz's bounce answers are bounced
	// (they admit nothing whatever this flag says).
	BounceOff = "off"
)

// BounceOptions are the settings of the full-mark bounce.
type BounceOptions struct {
	// FullBounce says who draws the bounce of a new session between the
	// full mark (--unready-at) and --max-sessions: bridge, authz or off.
	// Nothing is drawn with --unready-at 0. Default bridge.
	FullBounce string
}

// AddFlags registers one flag per field on fs.
func (o *BounceOptions) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.FullBounce, "full-bounce", o.FullBounce, "who bounces new sessions past the --unready-at mark (upgrade, then close 1013 replica_full; the agent redials in 1 s): bridge (this bridge draws), authz (extauthz beside it draws, before any TokenReview, from GET /room), off")
}

// Validate reports an invalid setting, naming its flag.
func (o *BounceOptions) Validate() error {
	switch o.FullBounce {
	case "", BounceByBridge, BounceByAuthz, BounceOff: // empty: bridge, for embedders
		return nil
	}
	return fmt.Errorf("--full-bounce: want bridge, authz or off, got %q", o.FullBounce)
}
