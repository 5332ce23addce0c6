package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The --every-peer check of the sessions subcommand: the evidence that the
// relay lock-down can start (docs/alongside-chart.md#evidence). Every node's
// WireKube agent creates its own WireKubePeer, labelled wirekube.io/node
// with the node's name (WireKube pkg/agent, agentManagedPeerLabel); a peer
// so labelled whose name has no live session through the gateway is an
// agent still on transport tcp, or off the relay.

const (
	// agentPeerLabel marks the WireKubePeers WireKube's agents manage.
	agentPeerLabel = "wirekube.io/node"
	// peersPath lists WireKubePeers (cluster-scoped).
	peersPath = "/apis/wirekube.io/v1alpha1/wirekubepeers"
	// peerPageSize and maxPeerPages bound the listing: 100 pages of 500.
	peerPageSize = 500
	maxPeerPages = 100
)

// PeerCoverage is the --every-peer part of the report.
type PeerCoverage struct {
	// AgentPeers is the number of WireKubePeers labelled wirekube.io/node.
	AgentPeers int `json:"agent_peers"`
	// WithoutSession names those with no live session on any listed Pod,
	// sorted.
	WithoutSession []string `json:"without_session"`
}

// agentPeers lists the names of the agent-managed WireKubePeers, every page
// followed.
func (g *SessionsGatherer) agentPeers(ctx context.Context) ([]string, error) {
	var names []string
	cont := ""
	for range maxPeerPages {
		req := g.Proxy.Get().AbsPath(peersPath).Param("labelSelector", agentPeerLabel).
			Param("limit", strconv.Itoa(peerPageSize))
		if cont != "" {
			req = req.Param("continue", cont)
		}
		res := req.Do(ctx)
		var code int
		res.StatusCode(&code)
		body, err := res.Raw()
		if err != nil {
			return nil, g.peersError(err, code)
		}
		var page struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
			Items []struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			} `json:"items"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, &ExitError{Code: ExitRejected, Err: fmt.Errorf("list wirekubepeers: not a list: %w", err)}
		}
		for _, it := range page.Items {
			names = append(names, it.Metadata.Name)
		}
		if cont = page.Metadata.Continue; cont == "" {
			return names, nil
		}
	}
	return nil, &ExitError{Code: ExitRejected, Err: fmt.Errorf("list wirekubepeers: more than %d pages", maxPeerPages)}
}

// peersError maps a failed WireKubePeer listing to an exit code that says
// what is missing (the permission is cluster-wide: WireKubePeers are
// cluster-scoped).
func (g *SessionsGatherer) peersError(err error, code int) error {
	switch {
	case apierrors.IsForbidden(err):
		return &ExitError{Code: ExitDenied403, Err: fmt.Errorf("forbidden: your credentials may not list wirekubepeers (cluster-scoped; check with: kubectl auth can-i list wirekubepeers.wirekube.io)")}
	case apierrors.IsUnauthorized(err):
		return &ExitError{Code: ExitDenied401, Err: fmt.Errorf("list wirekubepeers: the API server did not accept your credentials (check --kubeconfig/--context)")}
	case code == http.StatusNotFound:
		return &ExitError{Code: ExitRejected, Err: fmt.Errorf("list wirekubepeers: 404: WireKube's CRD wirekubepeers.wirekube.io is not installed in this cluster")}
	case isAPIStatus(err):
		return &ExitError{Code: ExitRejected, Err: fmt.Errorf("list wirekubepeers: %w", err)}
	}
	return &ExitError{Code: ExitNetwork, Err: fmt.Errorf("list wirekubepeers: API server: %w", err)}
}

// coverage compares the agent peers with the peers of rep's sessions.
func coverage(peers []string, rep *SessionsReport) *PeerCoverage {
	live := map[string]bool{}
	for _, p := range rep.Pods {
		for _, s := range p.Sessions {
			live[s.Peer] = true
		}
	}
	c := &PeerCoverage{AgentPeers: len(peers), WithoutSession: []string{}}
	for _, name := range peers {
		if !live[name] {
			c.WithoutSession = append(c.WithoutSession, name)
		}
	}
	slices.Sort(c.WithoutSession)
	return c
}

// writeText writes one line per peer without a session, then the count.
func (c *PeerCoverage) writeText(w io.Writer) error {
	for _, name := range c.WithoutSession {
		if _, err := fmt.Fprintf(w, "%s: no live session through the gateway (agent still on tcp, or off the relay)\n", safe(name)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "%d of %d agent WireKubePeers (label %s) hold a live session\n",
		c.AgentPeers-len(c.WithoutSession), c.AgentPeers, agentPeerLabel)
	return err
}
