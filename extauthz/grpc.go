package extauthz

import (
	"context"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/wirekube/relay-ws/internal/clientaddr"
	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/logging"
)

// CheckServer is the Envoy ext_authz gRPC front end of an Authorizer.
type CheckServer struct {
	authv3.UnimplementedAuthorizationServer
	Authorizer *Authorizer
}

// Check implements envoy.service.auth.v3.Authorization. It never returns a
// gRPC error: every outcome, including a malformed request, is a CheckResponse
// so Envoy answers the client with our status and reason (fail closed).
func (s *CheckServer) Check(ctx context.Context, in *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	req := requestFromCheck(in)
	req.Front = grpcFront(ctx)
	d := s.Authorizer.Decide(ctx, req)
	return checkResponse(d), nil
}

// requestFromCheck normalizes a CheckRequest. Envoy sends lower-case header
// names; repeated headers arrive joined by "," in the headers map, or one
// entry each in header_map when Envoy is configured to send raw headers.
func requestFromCheck(in *authv3.CheckRequest) Request {
	h := in.GetAttributes().GetRequest().GetHttp()
	req := Request{Frontend: "grpc", UpgradeKnown: true, ConnectionKnown: true}
	if h == nil {
		req.TargetInvalid = true
		return req
	}
	req.Method = h.GetMethod()
	req.Target = h.GetPath()
	if req.Target == "" {
		req.TargetInvalid = true
	}
	hdr := checkHeaders(h)
	req.Authorization = hdr.authorization
	req.Origin = hdr.origin
	req.Upgrade = hdr.upgrade
	req.Connection = hdr.connection
	req.Subprotocols = hdr.subprotocols
	// use_remote_address: true makes Envoy append the address it saw to
	// x-forwarded-for (the PROXY protocol listener filter's source when
	// one runs); the source address is the same connection's peer, for a
	// request without the header.
	req.ForwardedFor = hdr.forwardedFor
	req.PeerAddress = in.GetAttributes().GetSource().GetAddress().GetSocketAddress().GetAddress()
	// Envoy fills id from x-request-id (the one it generated for an
	// external request, use_remote_address: true); the header is the
	// fallback for a caller that leaves id empty.
	req.RequestID = logging.RequestID(hdr.requestID)
	if id := h.GetId(); id != "" {
		req.RequestID = logging.RequestID([]string{id})
	}
	req.HasBody = h.GetSize() > 0 || len(h.GetBody()) > 0 || len(h.GetRawBody()) > 0 ||
		len(hdr.transferEncoding) > 0 || hasNonZero(hdr.contentLength)
	return req
}

func hasNonZero(values []string) bool {
	for _, v := range values {
		if strings.TrimLeft(strings.TrimSpace(v), "0") != "" {
			return true
		}
	}
	return false
}

// checkedHeaders are the request headers the decision reads.
type checkedHeaders struct {
	authorization, origin, upgrade, connection, transferEncoding, contentLength, requestID, subprotocols,
	forwardedFor []string
}

// Slots of the headers the decision reads, in checkedHeaders' order.
const (
	hdrAuthorization = iota
	hdrOrigin
	hdrUpgrade
	hdrConnection
	hdrTransferEncoding
	hdrContentLength
	hdrRequestID
	hdrSubprotocols
	hdrForwardedFor
	hdrSlots
)

// headerSlot returns the slot of header name k, or -1 when the decision does
// not read it.
func headerSlot(k string) int {
	switch strings.ToLower(k) {
	case "authorization":
		return hdrAuthorization
	case "origin":
		return hdrOrigin
	case "upgrade":
		return hdrUpgrade
	case "connection":
		return hdrConnection
	case "transfer-encoding":
		return hdrTransferEncoding
	case "content-length":
		return hdrContentLength
	case "x-request-id":
		return hdrRequestID
	case "sec-websocket-protocol":
		return hdrSubprotocols
	case "x-forwarded-for":
		return hdrForwardedFor
	}
	return -1
}

// checkHeaders collects the headers the decision reads from a CheckRequest:
// from header_map (one entry per header line) when Envoy sends it, else from
// the headers map (repeated lines joined by ","). It counts them first, so
// all the values share one allocation.
func checkHeaders(h *authv3.AttributeContext_HttpRequest) checkedHeaders {
	var count [hdrSlots]int
	hm := h.GetHeaderMap().GetHeaders()
	if len(hm) > 0 {
		for _, hv := range hm {
			if i := headerSlot(hv.GetKey()); i >= 0 {
				count[i]++
			}
		}
	} else {
		for k := range h.GetHeaders() {
			if i := headerSlot(k); i >= 0 {
				count[i]++
			}
		}
	}
	total := 0
	for _, n := range count {
		total += n
	}
	var slots [hdrSlots][]string
	if total > 0 {
		backing := make([]string, 0, total)
		for i, n := range count {
			if n > 0 { // a header not sent stays nil
				slots[i] = backing[:0:n]
				backing = backing[n:n:cap(backing)]
			}
		}
	}
	if len(hm) > 0 {
		for _, hv := range hm {
			i := headerSlot(hv.GetKey())
			if i < 0 {
				continue
			}
			v := hv.GetValue()
			if len(hv.GetRawValue()) > 0 {
				v = string(hv.GetRawValue())
			}
			slots[i] = append(slots[i], v)
		}
	} else {
		for k, v := range h.GetHeaders() {
			if i := headerSlot(k); i >= 0 {
				slots[i] = append(slots[i], v)
			}
		}
	}
	return checkedHeaders{
		authorization: slots[hdrAuthorization], origin: slots[hdrOrigin], upgrade: slots[hdrUpgrade],
		connection: slots[hdrConnection], transferEncoding: slots[hdrTransferEncoding],
		contentLength: slots[hdrContentLength], requestID: slots[hdrRequestID], subprotocols: slots[hdrSubprotocols],
		forwardedFor: slots[hdrForwardedFor],
	}
}

// allowHeader is one header of an allow answer with the messages it points
// to, so an answer's headers are one allocation, not three per header.
type allowHeader struct {
	opt    corev3.HeaderValueOption
	header corev3.HeaderValue
	append wrapperspb.BoolValue // false
}

// allowInline is how many headers an allow answer holds without a second
// allocation: a relay allow sets at most seven (bind.go's five and the
// two the signer appends); more spill into their own slices.
const allowInline = 8

// allowAnswer is an allow answer's messages and, up to allowInline, its
// headers, allocated together: one allocation per allow.
type allowAnswer struct {
	resp    authv3.CheckResponse
	status  status.Status
	ok      authv3.CheckResponse_OkResponse
	okHTTP  authv3.OkHttpResponse
	remove  [1]string
	hs      [allowInline]allowHeader
	headers [allowInline]*corev3.HeaderValueOption
}

func checkResponse(d Decision) *authv3.CheckResponse {
	if d.Allowed() {
		return allowResponse(d.Headers)
	}
	return deniedResponse(d)
}

// allowResponse is the OK answer setting hdrs (overwriting) upstream and
// removing the client's Authorization.
func allowResponse(hdrs []Header) *authv3.CheckResponse {
	a := new(allowAnswer)
	hs, headers := a.hs[:0], a.headers[:0]
	if len(hdrs) > allowInline {
		hs, headers = make([]allowHeader, 0, len(hdrs)), make([]*corev3.HeaderValueOption, 0, len(hdrs))
	}
	hs = hs[:len(hdrs)]
	for i, h := range hdrs {
		x := &hs[i]
		x.header.Key, x.header.Value = h.Name, h.Value
		x.opt.Header = &x.header
		//lint:ignore SA1019 docs/spec.md#envoy: set append=false explicitly beside append_action (Envoy 1.37 appended when unset).
		x.opt.Append = &x.append
		x.opt.AppendAction = corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		headers = append(headers, &x.opt)
	}
	a.status.Code = int32(codes.OK)
	a.remove[0] = "authorization"
	a.okHTTP.Headers = headers
	a.okHTTP.HeadersToRemove = a.remove[:]
	a.ok.OkResponse = &a.okHTTP
	a.resp.Status = &a.status
	a.resp.HttpResponse = &a.ok
	return &a.resp
}

// deniedResponse is the answer of a deny: its status, the reason header and
// a one-line body naming the reason.
func deniedResponse(d Decision) *authv3.CheckResponse {
	deniedHeaders := []*corev3.HeaderValueOption{
		denyHeader(contract.HeaderDenyReason, string(d.Reason)),
		denyHeader("Content-Type", "text/plain; charset=utf-8"),
		// As the HTTP mode's answer: no cache on the path keeps a deny.
		denyHeader("Cache-Control", "no-store"),
	}
	if d.Status() == 401 {
		deniedHeaders = append(deniedHeaders, denyHeader("WWW-Authenticate", "Bearer"))
	}
	if ra := retryAfter(d); ra != "" {
		deniedHeaders = append(deniedHeaders, denyHeader("Retry-After", ra))
	}
	return &authv3.CheckResponse{
		Status: &status.Status{Code: int32(grpcCode(d.Status())), Message: string(d.Reason)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(d.Status())},
			Headers: deniedHeaders,
			Body:    denyBody(d.Reason),
		}},
	}
}

func denyHeader(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{
		Header: &corev3.HeaderValue{Key: k, Value: v},
		//lint:ignore SA1019 docs/spec.md#envoy: explicit append=false, see checkResponse.
		Append:       wrapperspb.Bool(false),
		AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
	}
}

// denyBody is the one-line body of a deny: the reason code only.
func denyBody(r contract.Reason) string { return "denied: " + string(r) + "\n" }

func grpcCode(httpStatus int) codes.Code {
	switch httpStatus {
	case 400:
		return codes.InvalidArgument
	case 401:
		return codes.Unauthenticated
	case 503:
		return codes.Unavailable
	case 429:
		return codes.ResourceExhausted
	default:
		return codes.PermissionDenied
	}
}

// grpcFront is the gRPC connection a check came on (not the source
// address the CheckRequest claims); unknown when gRPC names no peer.
func grpcFront(ctx context.Context) clientaddr.Front {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return clientaddr.Front{}
	}
	return clientaddr.FrontOf(p.Addr)
}
