package probe

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/wirekube/relay-ws/internal/contract"
)

// The sessions subcommand also prints, per gateway Pod, where that Pod's
// extauthz sees the WireKubeMesh send the agents (docs/extauthz.md#mesh-watch),
// read from the same /metrics as the admission policy's state: the user
// needs no RBAC on WireKubeMeshes, and never sees the URL a node may have
// written there (extauthz exports only the target's class).

// MeshRelayView is one extauthz's view of the WireKubeMeshes.
type MeshRelayView struct {
	// Synced: extauthz has listed the WireKubeMeshes.
	Synced bool `json:"synced"`
	// Targets counts the WireKubeMeshes per target (only targets with one).
	Targets map[contract.MeshRelayTarget]int `json:"targets"`
}

// meshRelayTargets reads the view from a Prometheus text exposition
// (untrusted bytes: only known targets and whole counts); nil when
// extauthz exports no mesh watch metric.
func meshRelayTargets(metrics []byte) *MeshRelayView {
	prefix := []byte(contract.MetricMeshRelayTargets + `{target="`)
	synced := []byte(contract.MetricMeshRelayWatchSynced + " ")
	var v *MeshRelayView
	view := func() *MeshRelayView {
		if v == nil {
			v = &MeshRelayView{Targets: map[contract.MeshRelayTarget]int{}}
		}
		return v
	}
	for line := range bytes.Lines(metrics) {
		line = bytes.TrimSpace(line)
		if rest, ok := bytes.CutPrefix(line, synced); ok {
			view().Synced = string(bytes.TrimSpace(rest)) == "1"
			continue
		}
		rest, ok := bytes.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		target, value, ok := bytes.Cut(rest, []byte(`"} `))
		n, err := strconv.Atoi(string(bytes.TrimSpace(value)))
		t := contract.MeshRelayTarget(target)
		if !ok || err != nil || !slices.Contains(contract.MeshRelayTargets, t) {
			continue
		}
		if n > 0 {
			view().Targets[t] = n
		} else {
			view()
		}
	}
	return v
}

// writeMeshRelay writes one line per Pod whose view was read: the count
// per target, and what it means when a mesh sends tokens elsewhere.
func (r *SessionsReport) writeMeshRelay(w io.Writer) error {
	for _, p := range r.Pods {
		if p.MeshRelay == nil {
			continue
		}
		if _, err := fmt.Fprintf(w, "%s: WireKubeMesh relay: %s\n", safe(p.Pod), p.MeshRelay.text()); err != nil {
			return err
		}
	}
	return nil
}

func (v *MeshRelayView) text() string {
	if !v.Synced {
		return "not read by extauthz (RBAC get,list,watch on wirekubemeshes? docs/extauthz.md#mesh-watch)"
	}
	var parts []string
	exposed, unverified := false, false
	for _, t := range contract.MeshRelayTargets {
		if n := v.Targets[t]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", t, n))
			exposed = exposed || t.Exposes()
			unverified = unverified || t == contract.MeshRelayWSSUnverified
		}
	}
	if len(parts) == 0 {
		return "no WireKubeMesh"
	}
	s := strings.Join(parts, " ")
	switch {
	case exposed:
		s += ": agents send their relay tokens elsewhere than this gateway or in clear (docs/extauthz.md#mesh-watch)"
	case unverified:
		s += ": wss:// not compared, extauthz has no --expected-relay-url"
	}
	return s
}
