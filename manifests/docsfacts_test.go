package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docsFiles are the documents, the chart's NOTES, templates and values,
// the kustomize examples and components, README.md and SECURITY.md: every
// place that tells an operator something about WireKube.
func docsFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, root := range []string{"../docs", "../charts/wirekube-relay-ws/templates", "examples", "components"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".md") || strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".txt")) {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return append(files, "../charts/wirekube-relay-ws/values.yaml", "../README.md", "../SECURITY.md")
}

// TestDocsWireKubeFacts: what the documents and the chart's NOTES say
// about WireKube itself (docs/spec.md, the chart section): the agent's key
// is /var/lib/wirekube/privatekey (there is no /etc/wireguard key), and the
// allow answer carries five identity headers.
func TestDocsWireKubeFacts(t *testing.T) {
	keyPath := map[string]bool{}
	for _, f := range docsFiles(t) {
		s := readDoc(t, f)
		mustf(t, !strings.Contains(s, "/etc/wireguard"), "%s names /etc/wireguard: WireKube keeps the key at /var/lib/wirekube/privatekey", f)
		mustf(t, !strings.Contains(s, "four identity headers"), "%s counts four identity headers: there are five (X-WireKube-Binding)", f)
		keyPath[filepath.Base(f)] = strings.Contains(s, "/var/lib/wirekube/privatekey")
	}
	for _, f := range []string{"README.md", "tools.md", "alongside-chart.md", "NOTES.txt"} {
		mustf(t, keyPath[f], "%s gives no probe command with the agent's key /var/lib/wirekube/privatekey", f)
	}
}

func readDoc(t *testing.T, f string) string {
	t.Helper()
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	// One line per paragraph is not guaranteed: sentences are matched
	// across line breaks and comment markers.
	s := regexp.MustCompile(`\n[ \t]*(#[ \t]*)?`).ReplaceAllString(string(data), " ")
	return s
}

// wireKubeContradictions are sentences that contradict WireKube's own
// source (v0.0.17 and main; docs/spec.md sections 3 and 12), each with the
// fact it contradicts.
var wireKubeContradictions = []struct {
	name string
	re   *regexp.Regexp
	fact string
}{
	{"node CIDRs", regexp.MustCompile(`(?i)node CIDRs?|examples/tcp-migration|networkPolicy\.mode[=:] ?"?migrate\b|agents' nodes,? reach`),
		"there is no address stage: tcp agents dial status.relayEndpoint (the relay LoadBalancer) before the headless Service (managedRelayDialConfig), so the relay sees node, LB or client addresses"},
	{"node addresses", regexp.MustCompile(`(?i)(traffic|connections) (comes?|arrives?) from (their )?node addresses`),
		"tcp agents reach the relay through its LoadBalancer (managedRelayDialConfig): not reliably from node addresses"},
	{"managed agents need a restart", regexp.MustCompile(`(?i)restart the agents yourself|an agent (that was )?not restarted keeps|keeps the transport it started with`),
		"a managed agent moves to wss by itself within a 30 s sync once its tcp session drops (maybeRefreshRelayEndpoint)"},
	{"restart as readiness", regexp.MustCompile(`(?i)runs on .?wss.? and was restarted`),
		"readiness for the lock-down is every agent WireKubePeer holding a live wss session (sessions --every-peer), not a restart"},
	{"relayWs.replicas hedge", regexp.MustCompile(`(?i)if your chart version has no .?relayWs\.replicas`),
		"chart v0.0.17 has relayWs.replicas and relayWs.podDisruptionBudget.enabled"},
	{"node debugger Pod", regexp.MustCompile(`kubectl debug node/`),
		"a node debugger Pod with the sysadmin profile is privileged, which Pod Security baseline refuses: use a debug container in the agent's Pod"},
	{"kubectl rollback of a Helm release", regexp.MustCompile(`rollout undo`),
		"the chart is a Helm release: roll back with helm rollback, which keeps Helm's record of the release true"},
	{"wss agents leave a serving gateway", regexp.MustCompile(`(?i)move back (to tcp )?by themselves`),
		"a managed agent on wss redials the same URL after 1 s (relay client reconnectLoop) and the 30 s refresh acts only while disconnected: while the gateway serves, agents move back to tcp only on restart (docs/alongside-chart.md#rollback)"},
	{"CNI CIDR matching of nodes", regexp.MustCompile(`policy-cidr-match-mode`),
		"no node CIDR rule is shipped any more: its CNI caveat has nothing to qualify"},
}

// pendingElsewhere lists sentences of files other branches rewrite (the
// README's rewrite, SECURITY.md). Each entry must still match: once the file
// is fixed the test says to delete the entry.
var pendingElsewhere = map[string][]string{}

// TestDocsContradictNoWireKubeFact: no sentence of the documents says what
// WireKube's source contradicts (the table above).
func TestDocsContradictNoWireKubeFact(t *testing.T) {
	for _, f := range docsFiles(t) {
		s := readDoc(t, f)
		for _, c := range wireKubeContradictions {
			m := c.re.FindString(s)
			pending := false
			for _, p := range pendingElsewhere[f] {
				pending = pending || p == c.name
			}
			switch {
			case pending && m == "":
				t.Errorf("%s no longer says %q: delete its entry in pendingElsewhere", f, c.name)
			case !pending && m != "":
				t.Errorf("%s: %q contradicts WireKube: %s", f, m, c.fact)
			}
		}
	}
}

// TestDocsNameTheWireKubeBehaviour: the pages that walk an operator
// through the migration name the WireKube behaviour each step relies on,
// the evidence command, and what the lock-down cannot close.
func TestDocsNameTheWireKubeBehaviour(t *testing.T) {
	ownNode := `(?i)own nodes?\b`
	for f, wants := range map[string][]string{
		"../docs/alongside-chart.md":                      {"managedRelayDialConfig", "maybeRefreshRelayEndpoint", "status\\.relayEndpoint", "30 s", "sessions -n wirekube-system --every-peer", "v0\\.0\\.17 deletes its WireGuard interface", "87a21b8", ownNode},
		"../docs/spec.md":                                 {"managedRelayDialConfig", "maybeRefreshRelayEndpoint", "wirekube\\.io/node", ownNode},
		"../docs/upgrading.md":                            {"--every-peer", "mesh sync \\(30 s\\)", "moves? only on restart", ownNode},
		"../docs/deploy.md":                               {"--every-peer", "status\\.relayEndpoint", ownNode},
		"../docs/tools.md":                                {"agentManagedPeerLabel", "--every-peer"},
		"../charts/wirekube-relay-ws/templates/NOTES.txt": {"--every-peer", "mesh sync \\(every 30 s\\)", "never re-read the relay endpoint", "rollout restart daemonset/wirekube-agent", "can close: a Pod's own node"},
		"../charts/wirekube-relay-ws/values.yaml":         {"--every-peer", ownNode},
		"components/relay-lockdown/networkpolicy.yaml":    {"status\\.relayEndpoint", "--every-peer", ownNode},
		"examples/relay-lockdown/kustomization.yaml":      {"--every-peer", ownNode},
		"examples/mesh-managed/kustomization.yaml":        {"maybeRefreshRelayEndpoint", "--every-peer"},
		"examples/mesh-external/kustomization.yaml":       {"never re-reads the relay endpoint", "--every-peer"},
	} {
		s := readDoc(t, f)
		for _, w := range wants {
			mustf(t, regexp.MustCompile(w).MatchString(s), "%s does not say %q", f, w)
		}
	}
}

// TestDocsProbeFromAnywhere: the "probe from anywhere" recipes bind the
// agent token to the agent's Pod (which works on every Kubernetes the chart
// allows), say what `create serviceaccounts/token` on the agent account
// grants, and every mention of a Node-bound token names 1.31, the first
// release where ServiceAccountTokenNodeBinding is on by default (the chart
// allows 1.30).
func TestDocsProbeFromAnywhere(t *testing.T) {
	for _, f := range []string{"../docs/tools.md", "../charts/wirekube-relay-ws/templates/NOTES.txt"} {
		s := readDoc(t, f)
		for _, w := range []string{"--bound-object-kind=Pod", "serviceaccounts/token", "every node's agent", "--profile=general"} {
			mustf(t, strings.Contains(s, w), "%s does not say %q", f, w)
		}
	}
	node := regexp.MustCompile(`--bound-object-kind[= ]Node\b`)
	for _, f := range docsFiles(t) {
		s := readDoc(t, f)
		for _, loc := range node.FindAllStringIndex(s, -1) {
			near := s[max(0, loc[0]-200):min(len(s), loc[1]+200)]
			mustf(t, strings.Contains(near, "1.31"), "%s: a Node-bound token without 1.31 (ServiceAccountTokenNodeBinding on by default from 1.31; the chart allows 1.30): %q", f, near)
		}
	}
}
