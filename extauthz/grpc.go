package extauthz

import (
	"context"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/wrapperspb"

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
	d := s.Authorizer.Decide(ctx, requestFromCheck(in))
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
	authorization, origin, upgrade, connection, transferEncoding, contentLength, requestID, subprotocols []string
}

func (c *checkedHeaders) add(k, v string) {
	var dst *[]string
	switch strings.ToLower(k) {
	case "authorization":
		dst = &c.authorization
	case "origin":
		dst = &c.origin
	case "upgrade":
		dst = &c.upgrade
	case "connection":
		dst = &c.connection
	case "transfer-encoding":
		dst = &c.transferEncoding
	case "content-length":
		dst = &c.contentLength
	case "x-request-id":
		dst = &c.requestID
	case "sec-websocket-protocol":
		dst = &c.subprotocols
	default:
		return
	}
	*dst = append(*dst, v)
}

// checkHeaders collects the headers the decision reads from a CheckRequest:
// from header_map (one entry per header line) when Envoy sends it, else from
// the headers map (repeated lines joined by ",").
func checkHeaders(h *authv3.AttributeContext_HttpRequest) checkedHeaders {
	var out checkedHeaders
	if hm := h.GetHeaderMap().GetHeaders(); len(hm) > 0 {
		for _, hv := range hm {
			v := hv.GetValue()
			if len(hv.GetRawValue()) > 0 {
				v = string(hv.GetRawValue())
			}
			out.add(hv.GetKey(), v)
		}
		return out
	}
	for k, v := range h.GetHeaders() {
		out.add(k, v)
	}
	return out
}

func checkResponse(d Decision) *authv3.CheckResponse {
	if d.Allowed() {
		headers := make([]*corev3.HeaderValueOption, 0, len(d.Headers))
		for _, h := range d.Headers {
			headers = append(headers, &corev3.HeaderValueOption{
				Header: &corev3.HeaderValue{Key: h.Name, Value: h.Value},
				//lint:ignore SA1019 docs/spec.md#envoy: set append=false explicitly beside append_action (Envoy 1.37 appended when unset).
				Append:       wrapperspb.Bool(false),
				AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD,
			})
		}
		return &authv3.CheckResponse{
			Status: &status.Status{Code: int32(codes.OK)},
			HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
				Headers:         headers,
				HeadersToRemove: []string{"authorization"},
			}},
		}
	}
	deniedHeaders := []*corev3.HeaderValueOption{
		denyHeader(contract.HeaderDenyReason, string(d.Reason)),
		denyHeader("Content-Type", "text/plain; charset=utf-8"),
		// As the HTTP mode's answer: no cache on the path keeps a deny.
		denyHeader("Cache-Control", "no-store"),
	}
	if d.Status() == 401 {
		deniedHeaders = append(deniedHeaders, denyHeader("WWW-Authenticate", "Bearer"))
	}
	if d.Reason.Retryable() {
		deniedHeaders = append(deniedHeaders, denyHeader("Retry-After", "1"))
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
	default:
		return codes.PermissionDenied
	}
}
