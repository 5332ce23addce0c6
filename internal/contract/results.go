package contract

// Close reason of the bridge's RFC 6455 validation (docs/spec.md#close-reasons).
const (
	// CloseProtocolError: a client frame that breaks RFC 6455 (unmasked,
	// reserved bits or opcodes, bad fragmentation, oversized control frame).
	CloseProtocolError Reason = "websocket_protocol_error" // 1002
)

// Session results that end a session without a close frame from the bridge
// (docs/spec.md#results): they appear only in the "session ended" log line
// and as the result label of wirekube_bridge_sessions_total, beside the
// close reasons.
const (
	ResultClientClosed      Reason = "client_closed"       // the client sent a close frame
	ResultClientGone        Reason = "client_gone"         // read error without a close frame
	ResultClientWriteFailed Reason = "client_write_failed" // a write to the client failed or timed out
)

// Check results of extauthz (docs/spec.md#check-results).
const (
	// ResultAllowed is the reason label and log field of an allowed check;
	// every other value there is a deny reason.
	ResultAllowed Reason = "allowed"
	// ResultCanceled: the proxy or the client hung up (context.Canceled)
	// before the check finished, so no answer reached anyone. Kept apart
	// from review_unavailable (a TokenReview timeout or API error), which
	// means the API is in trouble.
	ResultCanceled Reason = "canceled"
	// ResultBounced: extauthz answered the bounce answer (BindingBounce)
	// for a bridge past its full mark, before any TokenReview; the result
	// label is "bounce".
	ResultBounced Reason = "bounced"
)
