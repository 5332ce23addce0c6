package envoystandin

import (
	"crypto/rand"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wirekube/relay-ws/internal/contract"
)

// stripClientIdentity removes every X-WireKube-* header the client sent, as
// the header_mutation filter placed before ext_authz in envoy/envoy.yaml does.
func stripClientIdentity(h http.Header) {
	for name := range h {
		if contract.IsWireKubeHeader(name) {
			delete(h, name)
		}
	}
}

// checkRequest builds the CheckRequest Envoy's ext_authz filter sends for r:
// lower-case header keys with repeated values joined by ",", the pseudo
// headers, the request target (path and query, undecoded) in path, the
// authority in host, size -1 when unknown, no body (envoy.yaml sets no
// with_request_body), and the socket addresses.
func checkRequest(r *http.Request, requestID string) *authv3.CheckRequest {
	// Envoy turns an absolute-form request target into the path form.
	target := r.URL.RequestURI()
	headers := map[string]string{
		":authority": r.Host,
		":method":    r.Method,
		":path":      target,
		":scheme":    "https",
	}
	for name, vs := range r.Header {
		headers[strings.ToLower(name)] = strings.Join(vs, ",")
	}
	headers["x-forwarded-proto"] = "https"
	headers["x-request-id"] = requestID
	size := int64(-1)
	if r.ContentLength >= 0 && len(r.TransferEncoding) == 0 {
		size = r.ContentLength
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source:      &authv3.AttributeContext_Peer{Address: socketAddress(r.RemoteAddr)},
		Destination: &authv3.AttributeContext_Peer{Address: socketAddress(addrString(local))},
		Request: &authv3.AttributeContext_Request{
			Time: timestamppb.New(time.Now()),
			Http: &authv3.AttributeContext_HttpRequest{
				Id:       requestID,
				Method:   r.Method,
				Headers:  headers,
				Path:     target,
				Host:     r.Host,
				Scheme:   "https",
				Size:     size,
				Protocol: r.Proto,
			},
		},
	}}
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func socketAddress(hostport string) *corev3.Address {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil
	}
	p, _ := strconv.ParseUint(port, 10, 32)
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: host, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p)},
	}}}
}

// applyHeaderOption applies one OK-response header as Envoy does: the
// deprecated `append` wins when set (ext_authz treats it as false when unset
// only in some releases, so an answer that relies on the default is treated
// as append here, the dangerous reading); otherwise append_action.
func applyHeaderOption(h http.Header, o *corev3.HeaderValueOption) {
	if o.GetHeader() == nil {
		return
	}
	key, val := o.GetHeader().GetKey(), o.GetHeader().GetValue()
	if val == "" && len(o.GetHeader().GetRawValue()) > 0 {
		val = string(o.GetHeader().GetRawValue())
	}
	action := o.GetAppendAction()
	//lint:ignore SA1019 Envoy still honours the deprecated field, so the stand-in must.
	if ap := o.GetAppend(); ap != nil {
		action = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		if ap.GetValue() {
			action = corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD
		}
	}
	_, exists := h[http.CanonicalHeaderKey(key)]
	switch action {
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
		h.Set(key, val)
	case corev3.HeaderValueOption_ADD_IF_ABSENT:
		if !exists {
			h.Set(key, val)
		}
	case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
		if exists {
			h.Set(key, val)
		}
	default: // APPEND_IF_EXISTS_OR_ADD
		h.Add(key, val)
	}
}

// newRequestID is an x-request-id like Envoy's (a random UUID v4 shape).
func newRequestID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0xf])
	}
	return string(out)
}
