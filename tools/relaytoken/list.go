package relaytoken

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Entry is one managed ServiceAccount (or an orphaned managed Secret). The
// json tags are the field names of `list -o json|yaml`.
type Entry struct {
	Namespace      string       `json:"namespace"`
	ServiceAccount string       `json:"serviceAccount"` // empty: the Secret's ServiceAccount is gone
	Peer           string       `json:"peer"`
	PeerExists     string       `json:"peerExists"` // "yes", "no" or "unknown" (not allowed to read peers)
	Secrets        []SecretInfo `json:"secrets"`
}

// SecretInfo is a managed Secret and the expiry recorded on it.
type SecretInfo struct {
	Name    string    `json:"name"`
	Expires time.Time `json:"expires"` // zero when the annotation is missing or unreadable
}

// ListOutput is the document `list -o json|yaml` prints: {"items": [...]}.
type ListOutput struct {
	Items []Entry `json:"items"`
}

// List returns the managed ServiceAccounts of namespace ("" for all), their
// peers and Secrets, sorted by namespace and peer.
func (t *Tool) List(ctx context.Context, namespace string) ([]Entry, error) {
	sel := metav1.ListOptions{LabelSelector: managedSelector}
	sas, err := t.Clients.Core.ServiceAccounts(namespace).List(ctx, sel)
	if err != nil {
		return nil, apiError(err, "list", "serviceaccounts", namespace)
	}
	secrets, err := t.Clients.Core.Secrets(namespace).List(ctx, sel)
	if err != nil {
		return nil, apiError(err, "list", "secrets", namespace)
	}
	peers, err := t.peerNames(ctx)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*Entry{}
	entry := func(ns, peer string) *Entry {
		k := ns + "/" + peer
		if byKey[k] == nil {
			byKey[k] = &Entry{Namespace: ns, Peer: peer, PeerExists: peerState(peers, peer)}
		}
		return byKey[k]
	}
	for _, sa := range sas.Items {
		entry(sa.Namespace, sa.Annotations[AnnotationPeer]).ServiceAccount = sa.Name
	}
	for _, s := range secrets.Items {
		info := SecretInfo{Name: s.Name}
		info.Expires, _ = time.Parse(time.RFC3339, s.Annotations[AnnotationExpires])
		e := entry(s.Namespace, s.Annotations[AnnotationPeer])
		e.Secrets = append(e.Secrets, info)
	}
	out := make([]Entry, 0, len(byKey))
	for _, e := range byKey {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Peer < out[j].Peer
	})
	return out, nil
}

// peerNames returns the WireKubePeer names, or nil when the caller may not
// list them (the list then says "unknown" rather than failing).
func (t *Tool) peerNames(ctx context.Context) (map[string]bool, error) {
	l, err := t.Clients.Dynamic.Resource(PeerResource).List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, apiError(err, "list", "wirekubepeers.wirekube.io", "")
	}
	names := make(map[string]bool, len(l.Items))
	for _, p := range l.Items {
		names[p.GetName()] = true
	}
	return names, nil
}

func peerState(peers map[string]bool, peer string) string {
	switch {
	case peers == nil:
		return "unknown"
	case peers[peer]:
		return "yes"
	default:
		return "no"
	}
}

// WriteList prints entries as a table; expiries are shown relative to now.
func WriteList(w io.Writer, entries []Entry, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tSERVICEACCOUNT\tPEER\tPEER-EXISTS\tSECRET\tEXPIRES")
	for _, e := range entries {
		sa := e.ServiceAccount
		if sa == "" {
			sa = "<deleted>"
		}
		names, exp := []string{}, []string{}
		for _, s := range e.Secrets {
			names = append(names, s.Name)
			exp = append(exp, expiryText(s.Expires, now))
		}
		if len(names) == 0 {
			names, exp = []string{"-"}, []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Namespace, sa, e.Peer, e.PeerExists,
			strings.Join(names, ","), strings.Join(exp, ","))
	}
	return tw.Flush()
}

func expiryText(t, now time.Time) string {
	switch {
	case t.IsZero():
		return "unknown"
	case !t.After(now):
		return t.Format(time.RFC3339) + " (expired)"
	default:
		return fmt.Sprintf("%s (in %s)", t.Format(time.RFC3339), t.Sub(now).Round(time.Minute))
	}
}
