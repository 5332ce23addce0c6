package manifests

import (
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// The PodTopologySpread filter of kube-scheduler v1.37.2, restated from its
// source (k8s.io/kubernetes pkg/scheduler/framework/plugins/podtopologyspread):
//   - common.go: a constraint's selector is its labelSelector plus, for each
//     matchLabelKeys key the incoming Pod has, key=value of that Pod; a node
//     counts toward the domains only when it has the topology key and, with
//     nodeTaintsPolicy Honor, every NoSchedule/NoExecute taint of it is
//     tolerated (matchNodeInclusionPolicies; Ignore, the default, counts it);
//   - filtering.go Filter: for each DoNotSchedule constraint, a node passes
//     when matching pods in its domain + 1 (the Pod matches itself) - the
//     minimum over the counted domains <= maxSkew.
// TaintToleration removes the tainted node as a candidate beforehand.

type spreadNode struct {
	name   string
	taints []corev1.Taint
}

type spreadPod struct {
	labels map[string]string
	node   string
}

var controlPlaneTaint = corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}

// untolerated: a NoSchedule or NoExecute taint none of tols tolerates.
func untolerated(taints []corev1.Taint, tols []corev1.Toleration) bool {
	for _, taint := range taints {
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		if !slices.ContainsFunc(tols, func(tol corev1.Toleration) bool { return tol.ToleratesTaint(klog.Background(), &taint, false) }) {
			return true
		}
	}
	return false
}

// spreadFits lists the nodes where pod (its labels and tolerations) passes
// TaintToleration and every DoNotSchedule constraint on hostname domains.
func spreadFits(t *testing.T, cons []corev1.TopologySpreadConstraint, tols []corev1.Toleration, podLabels map[string]string, nodes []spreadNode, pods []spreadPod) []string {
	t.Helper()
	var fits []string
	for _, cand := range nodes {
		if untolerated(cand.taints, tols) {
			continue
		}
		ok := true
		for _, c := range cons {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule {
				continue
			}
			if c.TopologyKey != corev1.LabelHostname {
				t.Fatalf("the model knows hostname domains only, got %s", c.TopologyKey)
			}
			sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range c.MatchLabelKeys {
				if v, has := podLabels[k]; has {
					req, _ := labels.NewRequirement(k, "=", []string{v})
					sel = sel.Add(*req)
				}
			}
			count := map[string]int{}
			for _, n := range nodes {
				if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor && untolerated(n.taints, tols) {
					continue
				}
				count[n.name] = 0
				for _, p := range pods {
					if p.node == n.name && sel.Matches(labels.Set(p.labels)) {
						count[n.name]++
					}
				}
			}
			self := 0
			if sel.Matches(labels.Set(podLabels)) {
				self = 1
			}
			if count[cand.name]+self-slices.Min(slices.Collect(maps.Values(count))) > int(c.MaxSkew) {
				ok = false
			}
		}
		if ok {
			fits = append(fits, cand.name)
		}
	}
	return fits
}

// TestChartSpreadRollsOnTwoWorkers: on a cluster of two workers and a
// tainted control plane (a cordoned node alike), the default spread lets
// the rolling update's surge Pod (maxSurge 1, maxUnavailable 0) and a
// third replica schedule; the constraints before nodeTaintsPolicy and
// matchLabelKeys held both Pending, the control plane pinning the minimum
// at 0.
func TestChartSpreadRollsOnTwoWorkers(t *testing.T) {
	d := renderChart(t).deployment(t)
	spec := d.Spec.Template.Spec
	tmpl := maps.Clone(d.Spec.Template.Labels)
	pod := func(hash, node string) spreadPod {
		l := maps.Clone(tmpl)
		l["pod-template-hash"] = hash
		return spreadPod{labels: l, node: node}
	}
	cordoned := corev1.Taint{Key: "node.kubernetes.io/unschedulable", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name  string
		nodes []spreadNode
		pods  []spreadPod
		want  []string
	}{
		{"surge Pod beside two old replicas, tainted control plane",
			[]spreadNode{{"w1", nil}, {"w2", nil}, {"cp", []corev1.Taint{controlPlaneTaint}}},
			[]spreadPod{pod("old", "w1"), pod("old", "w2")}, []string{"w1", "w2"}},
		{"third replica of one ReplicaSet on two workers, tainted control plane",
			[]spreadNode{{"w1", nil}, {"w2", nil}, {"cp", []corev1.Taint{controlPlaneTaint}}},
			[]spreadPod{pod("new", "w1"), pod("new", "w2")}, []string{"w1", "w2"}},
		{"second replica with a worker cordoned",
			[]spreadNode{{"w1", nil}, {"w2", []corev1.Taint{cordoned}}, {"w3", nil}},
			[]spreadPod{pod("new", "w1")}, []string{"w3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := spreadFits(t, spec.TopologySpreadConstraints, spec.Tolerations, pod("new", "").labels, tc.nodes, tc.pods)
			if !slices.Equal(got, tc.want) {
				t.Errorf("the Pod fits %v, want %v (constraints %+v)", got, tc.want, spec.TopologySpreadConstraints)
			}
		})
	}
	t.Run("the constraints before stall the surge Pod", func(t *testing.T) {
		old := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels}}}
		nodes := []spreadNode{{"w1", nil}, {"w2", nil}, {"cp", []corev1.Taint{controlPlaneTaint}}}
		if got := spreadFits(t, old, nil, pod("new", "").labels, nodes, []spreadPod{pod("old", "w1"), pod("old", "w2")}); len(got) != 0 {
			t.Errorf("the model lets the old constraints place the surge Pod on %v; kube-scheduler keeps it Pending", got)
		}
	})
}
