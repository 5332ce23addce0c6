package standin

import (
	"reflect"
	"testing"

	"github.com/wirekube/relay-ws/extauthz/internal/tokenreview"
	"github.com/wirekube/relay-ws/extauthz/internal/tokenverify"
)

// TestFollowUpIdentityMatch: a follow-up's TokenReview agrees with the
// claims it was admitted on only for the same ServiceAccount, and where
// both name a UID, Pod or Node, the same one; a field the answer leaves
// out (an API server before 1.30 names no node) does not differ.
func TestFollowUpIdentityMatch(t *testing.T) {
	assumed := tokenreview.Answer{Username: "system:serviceaccount:wirekube-system:agent", UID: "sa-1",
		PodName: "agent-a", PodUID: "pod-1", NodeName: "node-a", NodeUID: "node-1"}
	for _, tc := range []struct {
		name string
		edit func(*tokenreview.Answer)
		want bool
	}{
		{"the same identity", func(*tokenreview.Answer) {}, true},
		{"no node named", func(a *tokenreview.Answer) { a.NodeName, a.NodeUID = "", "" }, true},
		{"another ServiceAccount", func(a *tokenreview.Answer) { a.Username = "system:serviceaccount:wirekube-system:other" }, false},
		{"another ServiceAccount UID", func(a *tokenreview.Answer) { a.UID = "sa-2" }, false},
		{"another Pod of the same name", func(a *tokenreview.Answer) { a.PodUID = "pod-2" }, false},
		{"another Pod", func(a *tokenreview.Answer) { a.PodName = "agent-b" }, false},
		{"another Node", func(a *tokenreview.Answer) { a.NodeUID = "node-2" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := assumed
			tc.edit(&got)
			if ok := sameIdentity(&got, &assumed); ok != tc.want {
				t.Errorf("same identity %v, want %v", ok, tc.want)
			}
		})
	}
}

// TestOfflineReviewBindsOnlyWhatInformersCheck: the review that stands in
// offline names the token's ServiceAccount, Pod and Node and accepts it
// for the configured audience alone; a Secret-bound token, a subject that
// is not its ServiceAccount or claims without a ServiceAccount get none.
func TestOfflineReviewBindsOnlyWhatInformersCheck(t *testing.T) {
	claims := func(edit func(c *tokenverify.Claims)) *tokenverify.Claims {
		c := &tokenverify.Claims{}
		c.Subject = "system:serviceaccount:wirekube-system:agent"
		c.Kubernetes.Namespace = "wirekube-system"
		c.Kubernetes.ServiceAccount = &tokenverify.Ref{Name: "agent", UID: "sa-1"}
		c.Kubernetes.Pod = &tokenverify.Ref{Name: "agent-a", UID: "pod-1"}
		c.Kubernetes.Node = &tokenverify.Ref{Name: "node-a", UID: "node-1"}
		edit(c)
		return c
	}
	want := tokenreview.Answer{Authenticated: true, Audiences: []string{"wirekube-relay"},
		Username: "system:serviceaccount:wirekube-system:agent", UID: "sa-1",
		PodName: "agent-a", PodUID: "pod-1", NodeName: "node-a", NodeUID: "node-1"}
	rv, ok := offlineReview(claims(func(*tokenverify.Claims) {}), "wirekube-relay")
	if !ok || !reflect.DeepEqual(rv, want) {
		t.Errorf("pod-bound token: %+v, %v; want %+v, true", rv, ok, want)
	}
	for _, tc := range []struct {
		name string
		edit func(c *tokenverify.Claims)
	}{
		{"Secret-bound", func(c *tokenverify.Claims) { c.Kubernetes.Secret = &tokenverify.Ref{Name: "s", UID: "s-1"} }},
		{"subject of another ServiceAccount", func(c *tokenverify.Claims) { c.Subject = "system:serviceaccount:wirekube-system:other" }},
		{"no ServiceAccount", func(c *tokenverify.Claims) { c.Kubernetes.ServiceAccount = nil }},
		{"no namespace", func(c *tokenverify.Claims) { c.Kubernetes.Namespace = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if rv, ok := offlineReview(claims(tc.edit), "wirekube-relay"); ok {
				t.Errorf("offline review %+v, want none", rv)
			}
		})
	}
}
