package probe

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/wirekube/relay-ws/internal/contract"
)

// The sessions subcommand also prints, per gateway Pod, whether that Pod's
// extauthz sees the WireKubePeer admission policy in force
// (docs/revocation.md#admission). It reads extauthz's own /metrics through
// the same Pod proxy rather than the policy objects: what matters is what
// each running extauthz believes, the user needs no RBAC on cluster-scoped
// admission objects, and there is one judge of "in force" (extauthz's).

// DefaultAuthzPort is extauthz's metrics port name in manifests/base and
// the chart.
const DefaultAuthzPort = "authz-metrics"

// maxMetricsBytes bounds the extauthz /metrics body read (a few hundred
// KiB in practice).
const maxMetricsBytes = 4 << 20

// podMetrics reads pod's extauthz /metrics; nil when it cannot be read
// (no such port, the proxy refused): the listing goes on.
func (g *SessionsGatherer) podMetrics(ctx context.Context, pod *corev1.Pod) []byte {
	port, ok := containerPort(pod, g.AuthzPort)
	if !ok || g.AuthzPort == "" {
		return nil
	}
	rc, err := g.Proxy.Get().Namespace(g.Namespace).Resource("pods").Name(pod.Name + ":" + port).
		SubResource("proxy").Suffix("metrics").Stream(ctx)
	if err != nil {
		return nil
	}
	defer rc.Close()
	body, err := io.ReadAll(io.LimitReader(rc, maxMetricsBytes))
	if err != nil {
		return nil
	}
	return body
}

// admissionState finds the state whose
// wirekube_extauthz_peer_admission_state sample is 1 in a Prometheus text
// exposition (untrusted bytes: only a known state is returned).
func admissionState(metrics []byte) (contract.PeerAdmissionState, bool) {
	prefix := []byte(contract.MetricPeerAdmissionState + `{state="`)
	for line := range bytes.Lines(metrics) {
		rest, ok := bytes.CutPrefix(bytes.TrimSpace(line), prefix)
		if !ok {
			continue
		}
		state, value, ok := bytes.Cut(rest, []byte(`"} `))
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(string(bytes.TrimSpace(value)), 64)
		s := contract.PeerAdmissionState(state)
		if err == nil && v == 1 && slices.Contains(contract.PeerAdmissionStates, s) {
			return s, true
		}
	}
	return "", false
}

// writeAdmission writes one line per Pod whose extauthz state was read.
func (r *SessionsReport) writeAdmission(w io.Writer) error {
	for _, p := range r.Pods {
		switch p.PeerAdmission {
		case "":
		case contract.PeerAdmissionInForce:
			if _, err := fmt.Fprintf(w, "%s: WireKubePeer admission policy in force\n", safe(p.Pod)); err != nil {
				return err
			}
		default:
			if _, err := fmt.Fprintf(w, "%s: WireKubePeer admission policy NOT in force (%s): any agent may move another node's key (docs/revocation.md#admission)\n",
				safe(p.Pod), p.PeerAdmission); err != nil {
				return err
			}
		}
	}
	return nil
}
