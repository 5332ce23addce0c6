package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/kubeconfig"
)

// maxListingPages bounds the pages read from one bridge: 100 pages of
// contract.SessionsLimitMax is five times the bridge's default
// --max-sessions.
const maxListingPages = 100

// SessionsGatherer lists the gateway Pods and reads each one's bridge
// listing through the API server's Pod proxy:
// GET /api/v1/namespaces/{namespace}/pods/{name}:{port}/proxy/debug/sessions
// (the "connect GET requests to proxy of Pod" operation of the core/v1
// API). The API server puts the port into the Pod's address as given, so
// a port name is resolved here from the Pod's spec.
type SessionsGatherer struct {
	Pods      corev1client.PodInterface // of Namespace
	Proxy     rest.Interface            // the core/v1 REST client
	Namespace string
	Selector  string
	Port      string
	AuthzPort string
	Peer      string
}

// newKubeGatherer builds the gatherer from the kubeconfig rules of kubectl.
func newKubeGatherer(o SessionsOptions) (*SessionsGatherer, error) {
	rc, cc, err := kubeconfig.Load(o.Kubeconfig, o.Context, "wirekube-relay-probe")
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err}
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("kubernetes client: %w", err)}
	}
	ns := o.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" || ns == metav1.NamespaceDefault {
			ns = DefaultGatewayNamespace
		}
	}
	return &SessionsGatherer{Pods: cs.CoreV1().Pods(ns), Proxy: cs.CoreV1().RESTClient(),
		Namespace: ns, Selector: o.Selector, Port: o.Port, AuthzPort: o.AuthzPort, Peer: o.Peer}, nil
}

// Gather lists every matching Pod's sessions. The error is for the Pod
// listing (RBAC, credentials, the API server unreachable) and for a
// refused Pod proxy; a Pod that cannot be listed otherwise has its Error
// set in the report.
func (g *SessionsGatherer) Gather(ctx context.Context) (*SessionsReport, error) {
	pods, err := g.Pods.List(ctx, metav1.ListOptions{LabelSelector: g.Selector})
	if err != nil {
		return nil, g.apiError(err, "list", "pods")
	}
	rep := &SessionsReport{Namespace: g.Namespace, Selector: g.Selector, Pods: []PodSessions{}}
	for i := range pods.Items {
		ps, err := g.podSessions(ctx, &pods.Items[i])
		if err != nil {
			return nil, err
		}
		if ps.Error == "" {
			metrics := g.podMetrics(ctx, &pods.Items[i])
			ps.PeerAdmission, _ = admissionState(metrics)
			ps.MeshRelay = meshRelayTargets(metrics)
		}
		rep.Sessions += len(ps.Sessions)
		rep.Pods = append(rep.Pods, ps)
	}
	return rep, nil
}

func (g *SessionsGatherer) podSessions(ctx context.Context, pod *corev1.Pod) (PodSessions, error) {
	ps := PodSessions{Pod: pod.Name, Sessions: []contract.SessionInfo{}}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		ps.Error = fmt.Sprintf("not running (phase %s)", safe(string(pod.Status.Phase)))
		return ps, nil
	}
	port, ok := containerPort(pod, g.Port)
	if !ok {
		ps.Error = fmt.Sprintf("no container port named %s (pass --port)", g.Port)
		return ps, nil
	}
	after := ""
	for range maxListingPages {
		page, err := g.page(ctx, pod.Name, port, after)
		var pe podError
		if errors.As(err, &pe) {
			ps.Error = string(pe)
			return ps, nil
		}
		if err != nil {
			return ps, err
		}
		ps.Live = page.Live
		ps.Sessions = append(ps.Sessions, page.Sessions...)
		if page.Next == "" {
			return ps, nil
		}
		after = page.Next
	}
	ps.Error = fmt.Sprintf("more than %d pages", maxListingPages)
	return ps, nil
}

// podError is a failure of one Pod's listing: reported, not fatal.
type podError string

func (e podError) Error() string { return string(e) }

// page reads one page of a bridge's listing through the Pod proxy.
func (g *SessionsGatherer) page(ctx context.Context, pod, port, after string) (contract.SessionList, error) {
	req := g.Proxy.Get().Namespace(g.Namespace).Resource("pods").Name(pod+":"+port).
		SubResource("proxy").Suffix(strings.TrimPrefix(contract.SessionsPath, "/")).
		Param("limit", strconv.Itoa(contract.SessionsLimitMax))
	if after != "" {
		req = req.Param("after", after)
	}
	if g.Peer != "" {
		req = req.Param("peer", g.Peer)
	}
	res := req.Do(ctx)
	var code int
	res.StatusCode(&code)
	body, err := res.Raw()
	var list contract.SessionList
	switch {
	case code == http.StatusOK && err == nil:
		if err := json.Unmarshal(body, &list); err != nil {
			return list, podError(fmt.Sprintf("not a session listing: %v", err))
		}
		return list, nil
	case code == http.StatusForbidden || code == http.StatusUnauthorized:
		return list, g.apiError(err, "get", "pods/proxy")
	case code == http.StatusNotFound:
		return list, podError("404: the bridge runs without --debug-sessions (docs/bridge.md#who-is-connected), or the Pod is gone")
	case code == 0 && err != nil && ctx.Err() == nil && !isAPIStatus(err):
		return list, &ExitError{Code: ExitNetwork, Err: fmt.Errorf("API server: %w", err)}
	}
	return list, podError(fmt.Sprintf("%d: %s", code, firstLine(err)))
}

func isAPIStatus(err error) bool {
	var s apierrors.APIStatus
	return errors.As(err, &s)
}

// firstLine is err's message up to its first line break, bounded and
// quoted when not plain (it may carry the bridge's answer).
func firstLine(err error) string {
	if err == nil {
		return "no error"
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return strconv.Quote(s)
	}
	return s
}

// containerPort resolves name (a number is taken as is) to the Pod's
// container port of that name.
func containerPort(pod *corev1.Pod, name string) (string, bool) {
	if _, err := strconv.Atoi(name); err == nil {
		return name, true
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return strconv.Itoa(int(p.ContainerPort)), true
			}
		}
	}
	return "", false
}

// apiError maps an API error to the exit code and says which permission
// is missing.
func (g *SessionsGatherer) apiError(err error, verb, resource string) error {
	canI := fmt.Sprintf("kubectl auth can-i %s %s -n %s", verb, resource, g.Namespace)
	switch {
	case apierrors.IsForbidden(err):
		return &ExitError{Code: ExitDenied403, Err: fmt.Errorf("forbidden: your credentials may not %s %s in namespace %s (check with: %s)", verb, resource, g.Namespace, canI)}
	case apierrors.IsUnauthorized(err):
		return &ExitError{Code: ExitDenied401, Err: fmt.Errorf("%s %s: the API server did not accept your credentials (check --kubeconfig/--context)", verb, resource)}
	case isAPIStatus(err):
		return &ExitError{Code: ExitRejected, Err: fmt.Errorf("%s %s in namespace %s: %w", verb, resource, g.Namespace, err)}
	}
	return &ExitError{Code: ExitNetwork, Err: fmt.Errorf("%s %s: API server: %w", verb, resource, err)}
}
