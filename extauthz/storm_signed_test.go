package extauthz

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

// stormSignedPool is how many distinct signed tokens the stranger and flood
// storms mint before the run (RSA signing is too slow to keep up with the
// senders); the senders cycle through them.
const stormSignedPool = 4000

var attackNames = map[attackKind]string{
	attackForged:   "forged tokens",
	attackStranger: "stranger tokens (signed, ServiceAccount default/stranger)",
	attackFlood:    "one agent identity's tokens (signed, Pod agent-a)",
}

// attackTokens returns the token source of an attack. The fake API would
// authenticate every signed one: the stranger's as default/stranger, the
// flood's as the agent bound to Pod agent-a.
func attackTokens(e *env, k attackKind) func(i int) string {
	var spec func(now time.Time) tokenSpec
	var st authnv1.TokenReviewStatus
	switch k {
	case attackNone:
		return nil
	case attackForged:
		return forgedVariant
	case attackStranger:
		spec = func(now time.Time) tokenSpec { return specOf(e, "default", "stranger", "").withClock(now) }
		st = saStatus("default", "stranger", "uid-sa-stranger", nil)
	case attackFlood:
		spec = func(now time.Time) tokenSpec { return agentSpec(e).withClock(now) }
		st = podBound()
	}
	pool := mintPool(spec, stormSignedPool)
	for _, tok := range pool {
		e.answerToken(tok, func(string) (authnv1.TokenReviewStatus, error) {
			time.Sleep(stormAPIWait)
			return st, nil
		})
	}
	var next atomic.Int64
	return func(int) string { return pool[int(next.Add(1)-1)%len(pool)] }
}

// mintPool signs n distinct tokens on two goroutines (each has its own jti).
func mintPool(spec func(time.Time) tokenSpec, n int) []string {
	pool := make([]string, n)
	now := time.Now()
	var wg sync.WaitGroup
	for part := range 2 {
		wg.Go(func() {
			for i := part; i < n; i += 2 {
				pool[i] = spec(now).sign()
			}
		})
	}
	wg.Wait()
	return pool
}

// stormPods creates the Pods agent-0 ... agent-<n-1> the storm's agents are
// bound to (verify-offline checks them against the informers), waiting for
// the informers after every 50 (the fake watch buffers 100 events).
func stormPods(b *testing.B, e *env, n int) {
	ctx := context.Background()
	for i := range n {
		name := fmt.Sprintf("agent-%d", i)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "wirekube-system", Name: name, UID: types.UID("uid-" + name)},
			Spec:       corev1.PodSpec{ServiceAccountName: "wirekube-agent", NodeName: "node-a"},
		}
		_, err := e.client.CoreV1().Pods("wirekube-system").Create(ctx, pod, metav1.CreateOptions{})
		must(b, err)
		if i%50 == 49 || i == n-1 {
			testutil.Eventually(b, "the informers to see the storm's Pods", func() bool {
				_, ok := e.in.Pod("wirekube-system", name)
				return ok
			})
		}
	}
}
