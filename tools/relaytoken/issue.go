package relaytoken

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	clif "github.com/wirekube/relay-ws/internal/cli"
	"github.com/wirekube/relay-ws/internal/contract"
)

// IssueOptions are the flags of `issue`.
type IssueOptions struct {
	Peer      string
	Namespace string        // default DefaultNamespace
	Duration  time.Duration // default DefaultDuration, at least MinDuration
	Audience  string        // default contract.DefaultAudience
	// Exactly one destination: Secret (a Secret name in Namespace) or
	// TokenFile (--token-file: a file path, or "-" for stdout; the
	// deprecated --output sets it too).
	Secret    string
	TokenFile string
	// AllowMissingPeer issues even when the WireKubePeer does not exist.
	AllowMissingPeer bool
}

// AddFlags registers the flags of `issue` on fs (the kubectl-like ones
// come from the command); --output is the deprecated spelling of
// --token-file and warns on stderr.
func (o *IssueOptions) AddFlags(fs *flag.FlagSet, stderr io.Writer) {
	fs.StringVar(&o.Peer, "peer", o.Peer, "WireKubePeer name (required)")
	fs.DurationVar(&o.Duration, "duration", DefaultDuration, "requested token lifetime (at least 10m; the API server may cap it)")
	fs.StringVar(&o.Audience, "audience", contract.DefaultAudience, "token audience the gateway requires")
	fs.StringVar(&o.Secret, "secret", o.Secret, "write the token to this Secret (key \"token\"), usable as authSecretRef")
	fs.StringVar(&o.TokenFile, "token-file", o.TokenFile, "write the token to this file (mode 0600), or - for stdout")
	clif.AddDeprecatedAlias(fs, "output", "token-file", stderr)
	fs.BoolVar(&o.AllowMissingPeer, "allow-missing-peer", o.AllowMissingPeer, "issue even if the WireKubePeer does not exist")
}

// Validate reports every invalid option (errors.Join), each naming its
// flag.
func (o IssueOptions) Validate() error {
	var errs []error
	if err := ValidatePeer(o.Peer); err != nil {
		errs = append(errs, err)
	}
	if o.Duration != 0 && o.Duration < MinDuration {
		errs = append(errs, fmt.Errorf("%w: --duration %s is shorter than the %s kube-apiserver accepts", ErrUsage, o.Duration, MinDuration))
	}
	if (o.Secret == "") == (o.TokenFile == "") {
		errs = append(errs, fmt.Errorf("%w: exactly one of --secret NAME and --token-file FILE|- is required", ErrUsage))
	}
	if o.Secret != "" {
		if e := validation.IsDNS1123Subdomain(o.Secret); len(e) > 0 {
			errs = append(errs, fmt.Errorf("%w: --secret %q: %s", ErrUsage, o.Secret, strings.Join(e, "; ")))
		}
	}
	if o.Namespace != "" {
		if e := validation.IsDNS1123Label(o.Namespace); len(e) > 0 {
			errs = append(errs, fmt.Errorf("%w: --namespace %q: %s", ErrUsage, o.Namespace, strings.Join(e, "; ")))
		}
	}
	return errors.Join(errs...)
}

// Complete validates o (the same errors as Validate) and fills in the
// defaults; Issue runs it once.
func (o IssueOptions) Complete() (IssueOptions, error) {
	if err := o.Validate(); err != nil {
		return o, err
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Audience == "" {
		o.Audience = contract.DefaultAudience
	}
	return o, nil
}

// Issued describes what Issue did. It holds no token.
type Issued struct {
	Peer           string
	Namespace      string
	ServiceAccount string
	SAAction       string // "created", "exists" or "adopted"
	PeerMissing    bool   // the WireKubePeer was not found (--allow-missing-peer)
	Destination    string // "Secret NS/NAME (key token)", a file path or "stdout"
	Expires        time.Time
	Requested      time.Duration
}

// Tool runs the subcommands against a cluster. It holds no state of its
// own and is safe for concurrent use if its clients are.
type Tool struct {
	Clients Clients
}

// Issue makes sure the peer's ServiceAccount exists, requests a token and
// writes it to the chosen destination: a Secret, a 0600 file, or stdout
// (the writer tokenOut). The token goes nowhere else.
func (t *Tool) Issue(ctx context.Context, o IssueOptions, tokenOut io.Writer) (Issued, error) {
	o, err := o.Complete()
	if err != nil {
		return Issued{}, err
	}
	res := Issued{Peer: o.Peer, Namespace: o.Namespace, ServiceAccount: ServiceAccountName(o.Peer), Requested: o.Duration}
	if res.PeerMissing, err = t.checkPeer(ctx, o.Peer, o.AllowMissingPeer); err != nil {
		return res, err
	}
	if res.SAAction, err = t.ensureServiceAccount(ctx, o.Namespace, o.Peer); err != nil {
		return res, err
	}
	tok, expires, err := t.requestToken(ctx, o)
	if err != nil {
		return res, err
	}
	res.Expires = expires
	switch {
	case o.Secret != "":
		res.Destination = fmt.Sprintf("Secret %s/%s (key %s)", o.Namespace, o.Secret, SecretTokenKey)
		err = t.writeSecret(ctx, o, tok, expires)
	case o.TokenFile == "-":
		res.Destination = "stdout"
		_, err = io.WriteString(tokenOut, tok+"\n")
	default:
		res.Destination = o.TokenFile
		err = WriteTokenFile(o.TokenFile, tok)
	}
	return res, err
}

// checkPeer reports whether the WireKubePeer is missing. Without
// allowMissing a missing peer (or a failed check) is an error.
func (t *Tool) checkPeer(ctx context.Context, peer string, allowMissing bool) (bool, error) {
	_, err := t.Clients.Dynamic.Resource(PeerResource).Get(ctx, peer, metav1.GetOptions{})
	switch {
	case err == nil:
		return false, nil
	case allowMissing:
		return true, nil
	case apierrors.IsNotFound(err):
		return true, fmt.Errorf("%w: %q (is the name right and the WireKubePeer CRD installed? pass --allow-missing-peer to issue anyway)", ErrPeerNotFound, peer)
	default:
		return false, apiError(err, "get", "wirekubepeers.wirekube.io", "")
	}
}

// ensureServiceAccount creates the peer's ServiceAccount, or adopts one of
// that name made by hand (the seed's kubectl recipe) by labelling it.
func (t *Tool) ensureServiceAccount(ctx context.Context, ns, peer string) (string, error) {
	sas := t.Clients.Core.ServiceAccounts(ns)
	name := ServiceAccountName(peer)
	sa, err := sas.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		sa = &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: managedLabels(peer), Annotations: map[string]string{AnnotationPeer: peer}}}
		_, err = sas.Create(ctx, sa, metav1.CreateOptions{})
		switch {
		case err == nil:
			return "created", nil
		case apierrors.IsAlreadyExists(err): // a concurrent issue made it
			return "exists", nil
		case apierrors.IsNotFound(err):
			return "", fmt.Errorf("%w: %q (create it, or pass --namespace)", ErrNamespace, ns)
		}
		return "", apiError(err, "create", "serviceaccounts", ns)
	}
	if err != nil {
		return "", apiError(err, "get", "serviceaccounts", ns)
	}
	if isManaged(sa.Labels) && sa.Annotations[AnnotationPeer] == peer {
		return "exists", nil
	}
	sa = sa.DeepCopy()
	if sa.Labels == nil {
		sa.Labels = map[string]string{}
	}
	if sa.Annotations == nil {
		sa.Annotations = map[string]string{}
	}
	for k, v := range managedLabels(peer) {
		sa.Labels[k] = v
	}
	sa.Annotations[AnnotationPeer] = peer
	if _, err := sas.Update(ctx, sa, metav1.UpdateOptions{}); err != nil {
		return "", apiError(err, "update", "serviceaccounts", ns)
	}
	return "adopted", nil
}

// requestToken asks the TokenRequest API for a token. kube-apiserver may
// shorten or lengthen the duration; the expiry it returns is the truth.
func (t *Tool) requestToken(ctx context.Context, o IssueOptions) (string, time.Time, error) {
	secs := int64(o.Duration / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{o.Audience}, ExpirationSeconds: &secs}}
	got, err := t.Clients.Core.ServiceAccounts(o.Namespace).CreateToken(ctx, ServiceAccountName(o.Peer), tr, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, apiError(err, "create", "serviceaccounts/token", o.Namespace)
	}
	if got.Status.Token == "" {
		return "", time.Time{}, fmt.Errorf("create serviceaccounts/token: the API server returned no token")
	}
	return got.Status.Token, got.Status.ExpirationTimestamp.UTC(), nil
}
