package demo

import (
	"errors"
	"fmt"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testagent"
)

// OutcomeKind says at which point the gateway answered.
type OutcomeKind int

const (
	// KindNone: nothing observed (the attack could not run).
	KindNone OutcomeKind = iota
	// KindHTTP: the upgrade was refused with an HTTP status.
	KindHTTP
	// KindClose: the upgrade succeeded and the gateway closed the WebSocket.
	KindClose
	// KindOpen: the gateway let the attacker in and kept the session open.
	KindOpen
	// KindError: a transport error, neither a status nor a close frame.
	KindError
)

// Outcome is the gateway's answer to one attempt: an HTTP status or a close
// code, each with the stable reason code (contract.Reason).
type Outcome struct {
	Kind   OutcomeKind
	Code   int    // HTTP status or WebSocket close code
	Reason string // X-WireKube-Deny-Reason or the close reason
}

// Refused is the expectation "HTTP <status of r> r".
func Refused(r contract.Reason) Outcome {
	return Outcome{Kind: KindHTTP, Code: r.HTTPStatus(), Reason: string(r)}
}

// Closed is the expectation "close <code> r".
func Closed(code int, r contract.Reason) Outcome {
	return Outcome{Kind: KindClose, Code: code, Reason: string(r)}
}

func (o Outcome) String() string {
	switch o.Kind {
	case KindHTTP:
		return fmt.Sprintf("HTTP %d %s", o.Code, o.Reason)
	case KindClose:
		return fmt.Sprintf("close %d %s", o.Code, o.Reason)
	case KindOpen:
		return "session stayed open"
	case KindError:
		return "error: " + o.Reason
	}
	return "not run"
}

// outcomeOf classifies the error of a dial or of a read after the upgrade.
// A nil error means the attacker got in. Reason strings come from response
// headers and close frames the gateway writes: they never carry a token.
func outcomeOf(err error) Outcome {
	if err == nil {
		return Outcome{Kind: KindOpen}
	}
	var de *testagent.DialError
	if errors.As(err, &de) {
		return Outcome{Kind: KindHTTP, Code: de.Status, Reason: de.Reason}
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return Outcome{Kind: KindClose, Code: ce.Code, Reason: ce.Text}
	}
	return Outcome{Kind: KindError, Reason: err.Error()}
}

// Attack is one attempt the demo makes against the gateway and the answer
// the contract (docs/spec.md#deny-reasons) requires.
type Attack struct {
	Name string
	What string // one line for the docs and the report
	Want Outcome
}

// Attack names, in the order the demo runs them.
const (
	AttackOtherNodesKey = "another node's key"
	AttackNoToken       = "no token"
	AttackWrongAudience = "wrong audience"
	AttackTokenInURL    = "token in the URL"
	AttackDeletedPod    = "deleted Pod"
	AttackDeletedLive   = "Pod deleted while connected"
)

// Attacks is the expectation table. Wrong audience: kube-apiserver's
// TokenReview answers authenticated=false for a token issued for another
// audience; wirekube-extauthz then reads the (unverified) aud claim only to
// pick the more helpful reason, audience_mismatch, and the token stays
// denied either way.
func Attacks() []Attack {
	return []Attack{
		{AttackOtherNodesKey, "node-c's valid token, Register with node-b's key", Closed(websocket.ClosePolicyViolation, contract.CloseRegisterKeyMismatch)},
		{AttackNoToken, "upgrade without Authorization", Refused(contract.ReasonTokenMissing)},
		{AttackWrongAudience, "node-a's Pod-bound token issued for the API server audience", Refused(contract.ReasonAudienceMismatch)},
		{AttackTokenInURL, "valid header, and a token in ?access_token=", Refused(contract.ReasonTokenInURL)},
		{AttackDeletedPod, "node-c's token after its Pod was force-deleted", Refused(contract.ReasonPodNotFound)},
		{AttackDeletedLive, "node-d's live session when its Pod is force-deleted", Closed(websocket.ClosePolicyViolation, contract.ReasonPodNotFound)},
	}
}
