package extauthz

import (
	"net/url"
	"path"
	"strings"
)

// tokenQueryKeys are query parameter names that carry a credential by
// convention. Their presence with any non-empty value denies the request.
var tokenQueryKeys = [...]string{"access_token", "token", "id_token", "bearer"}

// splitTarget splits a request target ("/p?q", or an absolute URL as
// X-Original-URL carries it) into its path and raw query. The fragment, which
// a client never sends but a header might carry, is returned with the query
// so a token there is found too.
func splitTarget(target string) (p, rawQuery string, ok bool) {
	if target == "" {
		return "", "", false
	}
	if !strings.HasPrefix(target, "/") {
		u, err := url.Parse(target)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", "", false
		}
		target = u.RequestURI()
		if u.Fragment != "" {
			target += "#" + u.EscapedFragment()
		}
	}
	p, rawQuery, _ = strings.Cut(target, "?")
	if i := strings.IndexByte(p, '#'); i >= 0 {
		rawQuery = p[i+1:] + "&" + rawQuery
		p = p[:i]
	}
	return p, rawQuery, true
}

// hasTokenInURL reports whether the path or the raw query carries something
// that looks like a credential: a conventional token parameter, or any
// segment or value of JWT shape. It never returns what it found, so the
// caller cannot log or echo it.
func hasTokenInURL(p, rawQuery string) bool {
	for seg := range strings.SplitSeq(p, "/") {
		if looksLikeToken(seg) {
			return true
		}
	}
	for part := range strings.FieldsFuncSeq(rawQuery, func(r rune) bool { return r == '&' || r == ';' || r == '#' }) {
		k, v, _ := strings.Cut(part, "=")
		k = unescapeLenient(k)
		if v != "" {
			for _, name := range tokenQueryKeys {
				if strings.EqualFold(k, name) {
					return true
				}
			}
		}
		if looksLikeToken(k) || looksLikeToken(v) {
			return true
		}
	}
	return false
}

// looksLikeToken checks the raw and the unescaped form, and a
// "Bearer <jwt>" value, for JWT shape.
func looksLikeToken(s string) bool {
	if s == "" {
		return false
	}
	u := unescapeLenient(s)
	if isJWTShape(s) || isJWTShape(u) {
		return true
	}
	if _, rest, ok := strings.Cut(u, " "); ok && isJWTShape(strings.TrimSpace(rest)) {
		return true
	}
	return false
}

func unescapeLenient(s string) string {
	u, err := url.QueryUnescape(s)
	if err != nil {
		return s
	}
	return u
}

// cleanPath returns the decoded path when it is absolute and already in
// canonical form. A path with dot segments, doubled slashes or encoded
// slashes could be routed differently by the proxy and the upstream than it
// is matched here, so it is refused (ok=false).
func cleanPath(raw string) (string, bool) {
	if !strings.HasPrefix(raw, "/") || strings.Contains(strings.ToLower(raw), "%2f") ||
		strings.Contains(strings.ToLower(raw), "%5c") || strings.ContainsRune(raw, '\\') {
		return "", false
	}
	p, err := url.PathUnescape(raw)
	if err != nil {
		return "", false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	if c != p {
		return "", false
	}
	return p, true
}

// underPrefix reports whether p is prefix itself or below it at a segment
// boundary: "/metrics" covers "/metrics" and "/metrics/x", not "/metricsx".
func underPrefix(p, prefix string) bool {
	if prefix == "/" {
		return true
	}
	prefix = strings.TrimSuffix(prefix, "/")
	return p == prefix || strings.HasPrefix(p, prefix+"/")
}
