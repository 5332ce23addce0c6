package scale

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// The Service's endpoints follow the replicas' readiness, as Kubernetes
// keeps them: the kubelet probes each bridge's /readyz every probePeriod
// with probeTimeout; failureThreshold failures in a row take the Pod out
// of the endpoints, one success puts it back (the chart's bridge
// readinessProbe: periodSeconds 5, timeoutSeconds 3, failureThreshold left
// at Kubernetes' default 3, successThreshold 1). The endpoint change then
// reaches the clients (kube-proxy's rules) after propagation, assumed here
// (kube-proxy and the EndpointSlice controller are not run). A replica out
// of the endpoints keeps its sessions; the generators dial it no more
// (goneFronts) until it is back. A terminated or killed replica is out for
// good (endpoints.terminate).
const (
	probePeriod      = 5 * time.Second
	probeTimeout     = 3 * time.Second
	failureThreshold = 3
	propagation      = time.Second
)

// endpoints is the model. Every message to the generators goes out under
// mu, so a replica terminated is never put back by a probe in flight.
type endpoints struct {
	mu         sync.Mutex
	gens       []*generator
	replicas   []*replica
	terminated map[int]bool
	out        map[int]time.Time // replicas out for failing /readyz, since
	fails      map[int]int       // failures in a row
	removals   int               // times a replica was taken out for failing /readyz
	outFor     time.Duration     // their time out, closed windows only
}

func newEndpoints() *endpoints {
	return &endpoints{terminated: map[int]bool{}, out: map[int]time.Time{}, fails: map[int]int{}}
}

// setGens names the generators to tell (once they run); a generator
// started later would not know of a replica out.
func (e *endpoints) setGens(gens []*generator) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gens = gens
}

// add makes rep an endpoint (it is ready: startReplica waited for it).
func (e *endpoints) add(rep *replica) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.replicas = append(e.replicas, rep)
}

// terminate takes replica i out for good and tells the generators.
func (e *endpoints) terminate(i int) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.terminated[i] = true
	if since, ok := e.out[i]; ok {
		e.outFor += time.Since(since)
		delete(e.out, i)
		return nil // the generators already dial it no more
	}
	return e.sendLocked("gone", i)
}

func (e *endpoints) sendLocked(verb string, i int) error {
	for _, g := range e.gens {
		if err := g.send(verb, i); err != nil {
			return err
		}
	}
	return nil
}

// full reports the removals so far and their time out, open windows
// counted up to now.
func (e *endpoints) full() (int, time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.outFor
	for _, since := range e.out {
		d += time.Since(since)
	}
	return e.removals, d
}

// run probes every replica each probePeriod until ctx ends; logf gets a
// line per change.
func (e *endpoints) run(ctx context.Context, logf func(format string, a ...any)) {
	tick := time.NewTicker(probePeriod)
	defer tick.Stop()
	client := &http.Client{Timeout: probeTimeout}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		e.mu.Lock()
		reps := make([]*replica, 0, len(e.replicas))
		for _, rep := range e.replicas {
			if !e.terminated[rep.i] {
				reps = append(reps, rep)
			}
		}
		e.mu.Unlock()
		for _, rep := range reps {
			ok := probeReady(ctx, client, rep.bridgeMetrics)
			if err := e.observe(ctx, rep.i, ok, logf); err != nil {
				logf("scale: endpoints: %v\n", err)
				return
			}
		}
	}
}

// observe applies one probe result of replica i: a change reaches the
// generators after propagation, unless the replica was terminated
// meanwhile.
func (e *endpoints) observe(ctx context.Context, i int, ok bool, logf func(string, ...any)) error {
	e.mu.Lock()
	_, isOut := e.out[i]
	change := false
	switch {
	case e.terminated[i]:
	case ok:
		e.fails[i] = 0
		change = isOut
	case !isOut:
		e.fails[i]++
		change = e.fails[i] >= failureThreshold
	}
	e.mu.Unlock()
	if !change || sleepCtx(ctx, propagation) != nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	since, nowOut := e.out[i]
	if e.terminated[i] || nowOut != isOut {
		return nil
	}
	if isOut {
		e.outFor += time.Since(since)
		delete(e.out, i)
		logf("scale: replica %d ready again: back in the Service after %s\n", i, time.Since(since).Round(time.Second))
		return e.sendLocked("back", i)
	}
	e.out[i] = time.Now()
	e.removals++
	logf("scale: replica %d failed /readyz %d times in a row: out of the Service\n", i, failureThreshold)
	return e.sendLocked("gone", i)
}

// probeReady is one kubelet HTTP probe: a 2xx or 3xx answer passes.
func probeReady(ctx context.Context, client *http.Client, addr string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}
