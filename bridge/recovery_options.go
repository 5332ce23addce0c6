package bridge

import (
	"errors"
	"flag"
	"fmt"
	"time"
)

// RecoveryOptions are the settings of the relay hold, the per-peer limits
// and the key-mismatch backoff.
type RecoveryOptions struct {
	// RelayWait is how long an upgrade is held, unanswered, while the relay
	// is unreachable, before 503 relay_unavailable; 0 answers at once. Keep
	// it under the agent's 10 s handshake timeout. Default 7.5s, chosen
	// from the agent's backoff (docs/bridge.md#relay-wait): a 3, 15 or 40 s
	// outage then ends inside a held dial.
	RelayWait time.Duration
	// RelayWaitMax bounds the upgrades held at once; beyond it 503
	// relay_wait_full. Default 1000.
	RelayWaitMax int
	// MaxSessionsPerPeer caps one WireKubePeer's concurrent sessions
	// (held, upgrading or open); beyond it 429 peer_session_limit. Default 2:
	// the live session and its replacement during a reconnect.
	MaxSessionsPerPeer int
	// MaxUnregisteredPerPeer caps one peer's sessions that have not
	// verified their Register yet; beyond it 429 peer_unregistered_limit.
	// Default 1.
	MaxUnregisteredPerPeer int
	// KeyMismatchBackoffMax caps the window in which an identity whose
	// Register carried another key is refused 403 register_key_mismatch
	// before the upgrade (1 s, doubling per repeat). Default 60s.
	KeyMismatchBackoffMax time.Duration
}

// AddFlags registers one flag per field on fs, with o's current values as
// defaults.
func (o *RecoveryOptions) AddFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.RelayWait, "relay-wait", o.RelayWait, "hold an upgrade this long while the relay is unreachable before 503 relay_unavailable (0: answer at once; keep under the agent's 10s handshake timeout)")
	fs.IntVar(&o.RelayWaitMax, "relay-wait-max", o.RelayWaitMax, "maximum upgrades held waiting for the relay (503 relay_wait_full beyond)")
	fs.IntVar(&o.MaxSessionsPerPeer, "max-sessions-per-peer", o.MaxSessionsPerPeer, "maximum concurrent sessions of one WireKubePeer (429 peer_session_limit beyond)")
	fs.IntVar(&o.MaxUnregisteredPerPeer, "max-unregistered-per-peer", o.MaxUnregisteredPerPeer, "maximum sessions of one WireKubePeer not yet registered (429 peer_unregistered_limit beyond)")
	fs.DurationVar(&o.KeyMismatchBackoffMax, "key-mismatch-backoff-max", o.KeyMismatchBackoffMax, "cap of the window (1s doubling) in which an identity that registered a wrong key gets 403 register_key_mismatch before the upgrade")
}

// Validate reports every invalid setting, each error naming its flag.
func (o *RecoveryOptions) Validate() error {
	var errs []error
	if o.RelayWait < 0 || o.RelayWait >= 10*time.Second {
		errs = append(errs, fmt.Errorf("--relay-wait: want 0 to under the agent's 10s handshake timeout, got %s", o.RelayWait))
	}
	if o.RelayWaitMax < 1 {
		errs = append(errs, fmt.Errorf("--relay-wait-max: must be at least 1, got %d", o.RelayWaitMax))
	}
	if o.MaxSessionsPerPeer < 1 {
		errs = append(errs, fmt.Errorf("--max-sessions-per-peer: must be at least 1, got %d", o.MaxSessionsPerPeer))
	}
	if o.MaxUnregisteredPerPeer < 1 || o.MaxUnregisteredPerPeer > o.MaxSessionsPerPeer {
		errs = append(errs, fmt.Errorf("--max-unregistered-per-peer: want 1 to --max-sessions-per-peer (%d), got %d",
			o.MaxSessionsPerPeer, o.MaxUnregisteredPerPeer))
	}
	if o.KeyMismatchBackoffMax < time.Second {
		errs = append(errs, fmt.Errorf("--key-mismatch-backoff-max: must be at least 1s, got %s", o.KeyMismatchBackoffMax))
	}
	return errors.Join(errs...)
}
