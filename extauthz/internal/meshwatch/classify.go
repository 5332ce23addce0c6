package meshwatch

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/wirekube/relay-ws/internal/contract"
)

// GVR is the WireKubeMesh resource (cluster-scoped).
var GVR = schema.GroupVersionResource{Group: "wirekube.io", Version: "v1alpha1", Resource: "wirekubemeshes"}

// Kind is the WireKubeMesh kind.
const Kind = "WireKubeMesh"

// Which relay endpoint a WireKubeMesh makes WireKube's agents dial, read
// the way the agent reads it (v0.0.17 and main, pkg/agent/agent.go:
// initRelay, externalRelayDialConfig, managedRelayDialConfig): mode
// "never" dials nothing; provider external dials external.controlEndpoint
// (transport ws or wss, a URL of that scheme) or, on tcp, controlEndpoint
// else external.endpoint; provider managed dials managed.controlEndpoint on
// wss, and on tcp managed.controlEndpoint, else status.relayEndpoint, else
// the cluster-local control Service. On ws and wss the agent sends its
// relay token (Authorization: Bearer) to that URL, ws:// included; on tcp
// it sends none.
//
// Every field is written by whoever may update the mesh, which WireKube's
// agent ClusterRole grants every node: nothing here is logged as given.
// meshRelay carries only fixed words, booleans and a short hash.

// meshRelay is the judgement of one WireKubeMesh.
type meshRelay struct {
	Target    contract.MeshRelayTarget
	Provider  string // external, managed, or other
	Transport string // tcp, ws, wss, or other
	// Source names the field the endpoint came from: controlEndpoint,
	// endpoint, status.relayEndpoint, service, or "" (none).
	Source string
	// HostMatch and PathMatch compare a ws/wss URL with the expected one
	// (false without one).
	HostMatch, PathMatch bool
	// Hash is the first 8 hex digits of the endpoint's SHA-256 ("" for
	// none): an operator can tell whether two reports are the same URL, and
	// compare it with `printf %s URL | sha256sum`, without the log carrying
	// what a node wrote.
	Hash string
}

// meshRelayFields are the strings the agent reads; fetched by the caller
// from the object (meshwatch.go). ok false: a field of the wrong type,
// which the agent cannot decode either.
type meshRelayFields struct {
	Present                               bool // spec.relay exists
	Mode, Provider                        string
	External                              bool // spec.relay.external exists
	ExtTransport, ExtControl, ExtEndpoint string
	MgdTransport, MgdControl              string
	StatusEndpoint                        string
}

// classifyMeshRelay judges f against expected (nil: no --expected-relay-url).
func classifyMeshRelay(f meshRelayFields, expected *url.URL) meshRelay {
	if !f.Present || f.Mode == "never" {
		return meshRelay{Target: contract.MeshRelayOff, Provider: word(f.Provider, "external", "managed")}
	}
	switch f.Provider {
	case "external":
		return classifyExternal(f, expected)
	case "managed":
		return classifyManaged(f, expected)
	}
	return meshRelay{Target: contract.MeshRelayUnusable, Provider: "other"}
}

func classifyExternal(f meshRelayFields, expected *url.URL) meshRelay {
	r := meshRelay{Provider: "external", Transport: transportOf(f.ExtTransport)}
	if !f.External {
		r.Target = contract.MeshRelayUnusable
		return r
	}
	switch r.Transport {
	case "tcp":
		r.Source, r.Hash = "endpoint", shortHash(f.ExtEndpoint)
		endpoint := f.ExtEndpoint
		if f.ExtControl != "" {
			r.Source, r.Hash, endpoint = "controlEndpoint", shortHash(f.ExtControl), f.ExtControl
		}
		r.Target = rawTCPTarget(endpoint)
	case "ws", "wss":
		r.Source, r.Hash = "controlEndpoint", shortHash(f.ExtControl)
		r.judgeURL(f.ExtControl, r.Transport, expected)
	default:
		r.Target = contract.MeshRelayUnusable
	}
	return r
}

func classifyManaged(f meshRelayFields, expected *url.URL) meshRelay {
	r := meshRelay{Provider: "managed", Transport: transportOf(f.MgdTransport)}
	switch r.Transport {
	case "tcp":
		switch control, status := strings.TrimSpace(f.MgdControl), strings.TrimSpace(f.StatusEndpoint); {
		case control != "":
			r.Source, r.Hash, r.Target = "controlEndpoint", shortHash(control), rawTCPTarget(control)
		case status != "":
			r.Source, r.Hash, r.Target = "status.relayEndpoint", shortHash(status), rawTCPTarget(status)
		default:
			r.Source, r.Target = "service", contract.MeshRelayRawTCP
		}
	case "wss": // only from a spec.relay.managed: without one the transport is tcp
		r.Source, r.Hash = "controlEndpoint", shortHash(f.MgdControl)
		r.judgeURL(f.MgdControl, "wss", expected)
	default: // ws included: the managed provider has no ws transport
		r.Target = contract.MeshRelayUnusable
	}
	return r
}

// transportOf is the agent's reading of a transport field (trimmed, lower
// case, empty is tcp), reduced to the words it knows.
func transportOf(v string) string {
	t := strings.ToLower(strings.TrimSpace(v))
	if t == "" {
		return "tcp"
	}
	return word(t, "tcp", "ws", "wss")
}

func word(v string, known ...string) string {
	for _, k := range known {
		if v == k {
			return v
		}
	}
	return "other"
}

// rawTCPTarget: a tcp endpoint the agent accepts (host:port, no WebSocket
// scheme) is the raw relay; anything else it refuses.
func rawTCPTarget(endpoint string) contract.MeshRelayTarget {
	if strings.TrimSpace(endpoint) == "" || websocketScheme(endpoint) != "" {
		return contract.MeshRelayUnusable
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" {
		return contract.MeshRelayUnusable
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return contract.MeshRelayUnusable
	}
	return contract.MeshRelayRawTCP
}

// websocketScheme is the agent's test of a WebSocket URL: it parses, has a
// host, and its scheme is ws or wss in any case. (The agent's dialer then
// looks for a lower-case "ws://" or "wss://" prefix; an upper-case scheme
// makes its dial fail, but it is judged here as the URL it names, so a fix
// on the agent's side cannot turn a foreign URL into a silent one.)
func websocketScheme(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return ""
	}
	if s := strings.ToLower(u.Scheme); s == "ws" || s == "wss" {
		return s
	}
	return ""
}

// judgeURL sets the target of a ws/wss transport's controlEndpoint.
func (r *meshRelay) judgeURL(raw, transport string, expected *url.URL) {
	if strings.TrimSpace(raw) == "" || websocketScheme(raw) != transport {
		r.Target = contract.MeshRelayUnusable
		return
	}
	u, _ := url.Parse(raw) // parsed by websocketScheme
	if expected != nil {
		r.HostMatch = sameHostPort(u, expected)
		r.PathMatch = cleanURLPath(u) == cleanURLPath(expected)
	}
	switch {
	case transport == "ws":
		r.Target = contract.MeshRelayWSCleartext
	case expected == nil:
		r.Target = contract.MeshRelayWSSUnverified
	case r.HostMatch && r.PathMatch:
		r.Target = contract.MeshRelayThisGateway
	default:
		r.Target = contract.MeshRelayOtherWSS
	}
}

// sameHostPort compares host names case-insensitively and without a
// trailing dot, and ports with 443 for none.
func sameHostPort(a, b *url.URL) bool {
	host := func(u *url.URL) string { return strings.TrimSuffix(strings.ToLower(u.Hostname()), ".") }
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		return "443"
	}
	return host(a) != "" && host(a) == host(b) && port(a) == port(b)
}

// cleanURLPath is the request path the URL sends (an empty one is "/").
func cleanURLPath(u *url.URL) string {
	if p := u.EscapedPath(); p != "" {
		return p
	}
	return "/"
}

func shortHash(v string) string {
	if v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:4])
}

// judgeMesh reads u's relay fields and classifies them. A field of the
// wrong type is unusable: the agent cannot decode such a mesh.
func judgeMesh(u *unstructured.Unstructured, expected *url.URL) meshRelay {
	f, ok := meshRelayFieldsOf(u.Object)
	if !ok {
		return meshRelay{Target: contract.MeshRelayUnusable, Provider: "other", Transport: "other"}
	}
	return classifyMeshRelay(f, expected)
}

// meshRelayFieldsOf reads the fields of meshRelayFields; false when one
// has the wrong type. A null is absent, as the agent's decoder sees it.
func meshRelayFieldsOf(obj map[string]any) (meshRelayFields, bool) {
	var f meshRelayFields
	ok := true
	str := func(dst *string, m map[string]any, path ...string) {
		v, _, err := unstructured.NestedString(m, path...)
		ok = ok && err == nil
		*dst = v
	}
	str(&f.StatusEndpoint, obj, "status", "relayEndpoint")
	relay, present := nestedObject(obj, &ok, "spec", "relay")
	if !present {
		return f, ok
	}
	f.Present = true
	str(&f.Mode, relay, "mode")
	str(&f.Provider, relay, "provider")
	if ext, present := nestedObject(relay, &ok, "external"); present {
		f.External = true
		str(&f.ExtTransport, ext, "transport")
		str(&f.ExtControl, ext, "controlEndpoint")
		str(&f.ExtEndpoint, ext, "endpoint")
	}
	if mgd, present := nestedObject(relay, &ok, "managed"); present {
		str(&f.MgdTransport, mgd, "transport")
		str(&f.MgdControl, mgd, "controlEndpoint")
	}
	return f, ok
}

// nestedObject is the object at path; absent for none or null, and *ok
// cleared for a value that is not an object.
func nestedObject(m map[string]any, ok *bool, path ...string) (map[string]any, bool) {
	v, found, err := unstructured.NestedFieldNoCopy(m, path...)
	if err != nil {
		*ok = false
		return nil, false
	}
	if !found || v == nil {
		return nil, false
	}
	obj, isObj := v.(map[string]any)
	*ok = *ok && isObj
	return obj, isObj
}

// slimMesh is the mesh informer's transform: only the fields judgeMesh
// reads stay in the cache.
func slimMesh(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	out.SetName(u.GetName())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	for _, path := range [][]string{{"spec", "relay"}, {"status", "relayEndpoint"}} {
		if v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...); err == nil && found {
			_ = unstructured.SetNestedField(out.Object, v, path...)
		}
	}
	return out, nil
}
