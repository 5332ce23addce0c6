package identitycheck

import (
	"flag"
	"fmt"
	"time"
)

// KeysReloadOptions are the settings of the periodic re-read of the
// identity keys file (docs/revocation.md#rotation).
type KeysReloadOptions struct {
	// IdentityKeysReloadInterval is how often the bridge re-reads
	// --identity-keys-file: a key dropped from the file (the last step of a
	// rotation, or a compromised key revoked) stops verifying within it.
	// A file that is missing or does not parse keeps the keys of the last
	// good read (counted in
	// wirekube_bridge_identity_keys_reload_errors_total, logged). Default
	// 10s, extauthz's own re-read period of its key files.
	IdentityKeysReloadInterval time.Duration
}

// AddFlags registers one flag per field on fs.
func (o *KeysReloadOptions) AddFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.IdentityKeysReloadInterval, "identity-keys-reload-interval", o.IdentityKeysReloadInterval, "re-read --identity-keys-file this often: a key dropped from it stops verifying within this interval")
}

// Validate reports an invalid setting, naming its flag.
func (o *KeysReloadOptions) Validate() error {
	if o.IdentityKeysReloadInterval < time.Second || o.IdentityKeysReloadInterval > 5*time.Minute {
		return fmt.Errorf("--identity-keys-reload-interval: want 1s to 5m, got %s", o.IdentityKeysReloadInterval)
	}
	return nil
}
