package extauthz

import (
	"fmt"
	"github.com/wirekube/relay-ws/extauthz/internal/revocationhub"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wirekube/relay-ws/internal/revocation"
)

// BenchmarkRevocationBurst: 5,000 live bindings on one Watch stream over
// real gRPC, then 500 of their Pods deleted in one burst through the API
// (fake clientset, real informers). It reports the time from the last
// delete to the last revocation received and the process CPU seconds of
// the burst (extauthz's hub, informers and the stream's receiving end:
// the bridge's share is decoding and one close per revocation).
func BenchmarkRevocationBurst(b *testing.B) {
	const live, burst = 5000, 500
	for range b.N {
		e := newEnv(b, nil)
		objs := &benchObjects{Objects: e.in, pods: map[string]*corev1.Pod{}}
		e.authz.rules = newRules(e.authz.cfg, objs)
		ops := make([]revocation.Op, 0, live+1)
		for i := range live {
			name, uid := fmt.Sprintf("bench-%d", i), fmt.Sprintf("uid-bench-%d", i)
			objs.pods[name] = &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: "wirekube-system", Name: name, UID: types.UID(uid)},
				Spec:       corev1.PodSpec{ServiceAccountName: "wirekube-agent", NodeName: "node-a"},
			}
			bd := podBinding()
			bd.PodName, bd.PodUID, bd.NodeName, bd.NodeUID = name, uid, "", ""
			ops = append(ops, revocation.Op{Kind: revocation.KindAdd, ID: uint64(i + 1), Binding: bd.Format()})
		}
		c := startRevocation(b, e)
		c.send(append(ops, revocation.Op{Kind: revocation.KindSynced, ID: 1})...)
		if got := c.until(1); len(got) != 0 {
			b.Fatalf("%d revoked at the list", len(got))
		}
		cpu0 := cpuSeconds()
		for i := range burst {
			name := fmt.Sprintf("bench-%d", i)
			objs.delete(name)
			e.live.Notify(revocationhub.ObjectKey(revocationhub.KindPod, "wirekube-system", name)) // what the Pod informer's handler does
		}
		lastDelete := time.Now()
		for n := 0; n < burst; {
			ops, err := revocation.RecvFromExtauthz(c.stream)
			must(b, err)
			n += len(ops)
		}
		lag := time.Since(lastDelete)
		cpu := cpuSeconds() - cpu0
		b.ReportMetric(float64(lag.Microseconds())/1000, "ms-last-delete-to-last-revoke")
		b.ReportMetric(cpu, "cpu-s/burst")
		b.Logf("%d live bindings, %d Pods deleted in a burst: last delete -> last revocation received %s; process CPU %.3fs (hub + gRPC both ends)",
			live, burst, lag.Round(time.Microsecond), cpu)
	}
}

// benchObjects overlays the benchmark's Pods on the informers: the fake
// clientset's watch channel holds only 100 events, far fewer than a burst.
type benchObjects struct {
	Objects
	mu   sync.Mutex
	pods map[string]*corev1.Pod
}

func (o *benchObjects) Pod(ns, name string) (*corev1.Pod, bool) {
	o.mu.Lock()
	p, ok := o.pods[name]
	o.mu.Unlock()
	if ok {
		return p, true
	}
	return o.Objects.Pod(ns, name)
}

func (o *benchObjects) delete(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.pods, name)
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
