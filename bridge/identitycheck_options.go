package bridge

import "github.com/wirekube/relay-ws/bridge/internal/identitycheck"

// SignatureOptions are the flags of the identity header signature check
// (internal/identitycheck/signature_options.go).
type SignatureOptions = identitycheck.SignatureOptions

// KeysReloadOptions are the flags of the periodic re-read of the identity
// keys file (internal/identitycheck/keyreload_options.go).
type KeysReloadOptions = identitycheck.KeysReloadOptions

// DefaultIdentityKeysFile is extauthz's --identity-keys-file in the
// directory the Pod's two containers share (internal/identitycheck).
const DefaultIdentityKeysFile = identitycheck.DefaultKeysFile

// DefaultSignatureOptions returns the documented defaults of the signature
// check.
func DefaultSignatureOptions() SignatureOptions { return identitycheck.DefaultSignatureOptions() }
