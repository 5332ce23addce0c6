package logging

// MaxRequestID bounds a request id in a log line. The fronts generate far
// shorter ones: nginx's $request_id is 32 hex digits, Envoy's x-request-id a
// 36-character UUID, Caddy's {http.request.uuid} the same.
const MaxRequestID = 64

// RequestIDInvalid is logged in place of a request id that is not one a
// front generates (too long, or a character outside [A-Za-z0-9._-]). A
// front that passes a client's own X-Request-Id unchecked cannot put text of
// the client's choice in our logs this way.
const RequestIDInvalid = "[invalid]"

// RequestID returns the request id to log for the values of the
// X-Request-Id header: "" when there is none, the id itself when it is one
// value of 1 to MaxRequestID characters from [A-Za-z0-9._-], else
// RequestIDInvalid (repeated headers too: a front sets exactly one).
func RequestID(values []string) string {
	switch {
	case len(values) == 0:
		return ""
	case len(values) > 1:
		return RequestIDInvalid
	}
	v := values[0]
	if v == "" || len(v) > MaxRequestID {
		return RequestIDInvalid
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return RequestIDInvalid
		}
	}
	return v
}
