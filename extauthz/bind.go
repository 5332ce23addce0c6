package extauthz

import (
	"time"

	"github.com/wirekube/relay-ws/extauthz/internal/binding"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/revocation"
)

// Objects answers the identity lookups from local caches (informers), never
// from an API call per check (binding.Objects, what the binding rules read).
type Objects = binding.Objects

const saUserPrefix = binding.UsernamePrefix

// detailSubjectRefused is the log detail of a token refused before any API
// call because no configured rule admits the identity it names.
const detailSubjectRefused = "subject_not_admissible"

// newRules builds the binding rules of cfg over objs; the key history
// answers through objs when it can (Informers), else no key is refused as
// moved.
func newRules(cfg *Config, objs Objects) *binding.Rules {
	owners, _ := objs.(binding.KeyOwners)
	return binding.New(cfg.identities, objs, owners)
}

// subjectOf is what the binding rules read of a TokenReview answer.
func subjectOf(rv *tokenreview.Answer) binding.Subject {
	return binding.Subject{Username: rv.Username, UID: rv.UID,
		PodName: rv.PodName, PodUID: rv.PodUID, NodeName: rv.NodeName, NodeUID: rv.NodeUID}
}

// admissible: some rule of the path could admit the identity the verified
// claims name (binding.Rules.Admissible, the prefilter before TokenReview).
func (a *Authorizer) admissible(c *tokenverify.Claims, kind pathKind) bool {
	k := c.Kubernetes
	var name string
	if k.ServiceAccount != nil {
		name = k.ServiceAccount.Name
	}
	return a.rules.Admissible(c.Subject, k.Namespace, name, kind == pathAuthnOnly)
}

// bindPeer applies the identity rules of the relay path (binding.Rules.BindPeer)
// and, on success, returns the allow decision with the identity headers.
func (a *Authorizer) bindPeer(rv *tokenreview.Answer, exp time.Time) Decision {
	s := subjectOf(rv)
	r := a.rules.BindPeer(&s)
	if r.Reason != "" {
		d := Decision{Reason: r.Reason, Peer: r.Peer, Detail: r.Detail, firstHolder: r.FirstHolder}
		if r.KeyB64 != "" {
			d.KeyFingerprint = r.Key.Fingerprint()
		}
		return d
	}
	hs := append(make([]Header, 0, 5+signedHeaders),
		Header{contract.HeaderPeer, r.Peer},
		Header{contract.HeaderPublicKey, r.KeyB64},
		Header{contract.HeaderIdentity, rv.Username},
		Header{contract.HeaderTokenExpires, exp.UTC().Format(time.RFC3339)},
		Header{contract.HeaderBinding, r.Binding.Format()})
	return Decision{
		Peer:           r.Peer,
		KeyFingerprint: r.Key.Fingerprint(),
		Headers:        hs,
		binding:        r.Binding,
		signRoom:       true,
	}
}

// allowListed applies the --authn-only-path rule (binding.Rules.AllowListed);
// only X-WireKube-Identity is set.
func (a *Authorizer) allowListed(rv *tokenreview.Answer) Decision {
	s := subjectOf(rv)
	if reason := a.rules.AllowListed(&s); reason != "" {
		return deny(reason)
	}
	return Decision{Headers: []Header{{contract.HeaderIdentity, rv.Username}}}
}

// Rejudge judges a live binding again: it is the revocation hub's Judge
// (internal/revocationhub). A binding whose follow-up TokenReview failed no
// longer holds (token_invalid); any other is judged by the binding rules,
// the very rules of an upgrade (binding.Rules.Rejudge). Safe for concurrent
// use.
func (a *Authorizer) Rejudge(b revocation.Binding) contract.Reason {
	if a.after != nil && a.after.Distrusted(b) {
		return contract.ReasonTokenInvalid // its follow-up TokenReview failed (internal/standin)
	}
	return a.rules.Rejudge(b)
}
