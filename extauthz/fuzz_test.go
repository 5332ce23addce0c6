package extauthz

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

func TestParseAuthorization(t *testing.T) {
	jwt := "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3OTk5OTk5OTl9.c2lnbmF0dXJl"
	tests := []struct {
		name   string
		values []string
		want   string
		reason string
	}{
		{"valid", []string{"Bearer " + jwt}, jwt, ""},
		{"scheme any case", []string{"bEaReR " + jwt}, jwt, ""},
		{"missing", nil, "", "token_missing"},
		{"empty", []string{" "}, "", "token_missing"},
		{"scheme only", []string{"Bearer"}, "", "token_missing"},
		{"two values", []string{"Bearer " + jwt, "Bearer " + jwt}, "", "authorization_repeated"},
		{"joined", []string{"Bearer " + jwt + ", Bearer " + jwt}, "", "authorization_repeated"},
		{"basic", []string{"Basic Zm9vOmJhcg=="}, "", "token_malformed"},
		{"two segments", []string{"Bearer abcdefgh.ijklmnopqr"}, "", "token_malformed"},
		{"empty segment", []string{"Bearer abcdefgh..ijklmnopqr"}, "", "token_malformed"},
		{"trailing dot", []string{"Bearer abcdefgh.ijklmnopqr."}, "", "token_malformed"},
		{"space inside", []string{"Bearer abc defgh.ijkl.mnopqr"}, "", "token_malformed"},
		{"padding char", []string{"Bearer abcdefgh.ijklmnopqr.st="}, "", "token_malformed"},
		{"too long", []string{"Bearer a." + strings.Repeat("b", MaxTokenLength) + ".c"}, "", "token_malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := parseAuthorization(tc.values)
			if got != tc.want || string(reason) != tc.reason {
				t.Errorf("got %q %q, want %q %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

func FuzzParseAuthorization(f *testing.F) {
	f.Add("Bearer eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3OTk5OTk5OTl9.c2lnbmF0dXJl", "")
	f.Add("Bearer a.b.c", "Bearer x")
	f.Add("bearer    eyJ.eyJ.sig,Bearer", "")
	f.Fuzz(func(t *testing.T, a, b string) {
		values := []string{a}
		if b != "" {
			values = append(values, b)
		}
		tok, reason := parseAuthorization(values)
		if (tok == "") == (reason == "") {
			t.Fatalf("token %q with reason %q", tok, reason)
		}
		if tok != "" && (!isJWTShape(tok) || strings.ContainsAny(tok, ", ") || len(tok) > MaxTokenLength) {
			t.Fatalf("accepted %q", tok)
		}
		if tok != "" {
			_ = checkPayload(tok)
		}
	})
}

func TestCheckPayload(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		wantErr bool
	}{
		{"seconds", "eyJleHAiOjE3OTk5OTk5OTl9", false},
		{"padded", "eyJleHAiOjE3OTk5OTk5OTl9==", false},
		{"no exp", "eyJpc3MiOiJ4In0", true},
		{"string exp", "eyJleHAiOiIxIn0", true},
		{"negative", "eyJleHAiOi0xfQ", true},
		{"not json", "bm90IGpzb24", true},
		{"bad base64", "!!!", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkPayload("eyJhbGciOiJSUzI1NiJ9." + tc.payload + ".c2ln")
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func FuzzCheckPayload(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3OTk5OTk5OTl9.c2ln")
	f.Add("a.eyJleHAiOjEuNWUxMH0.b")
	f.Fuzz(func(t *testing.T, tok string) {
		if checkPayload(tok) != nil {
			return
		}
		var c struct {
			Exp float64 `json:"exp"`
		}
		if err := unverifiedClaims(tok, &c); err != nil || c.Exp <= 0 || c.Exp > 1e11 {
			t.Fatalf("accepted %q: exp %v, %v", tok, c.Exp, err)
		}
	})
}

func TestClaimsOtherAudience(t *testing.T) {
	enc := func(payload string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
	}
	tests := []struct {
		name  string
		token string
		want  bool
	}{
		{"string, ours", enc(`{"aud":"wirekube-relay"}`), false},
		{"string, other", enc(`{"aud":"https://kubernetes.default.svc"}`), true},
		{"string, case differs", enc(`{"aud":"WireKube-Relay"}`), true},
		{"array with ours", enc(`{"aud":["api","wirekube-relay"]}`), false},
		{"array without ours", enc(`{"aud":["api","other"]}`), true},
		{"empty array", enc(`{"aud":[]}`), true},
		{"no aud claim", enc(`{"exp":1799999999}`), false},
		{"null aud", enc(`{"aud":null}`), false},
		{"upper-case claim name", enc(`{"AUD":"other"}`), false},
		{"number aud", enc(`{"aud":7}`), false},
		{"mixed array", enc(`{"aud":["other",7]}`), false},
		{"not json", enc(`not json`), false},
		{"bad base64", "eyJhbGciOiJSUzI1NiJ9.!!!.c2ln", false},
		{"not a JWT", "abc", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := claimsOtherAudience(tc.token, "wirekube-relay"); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzClaimsOtherAudience(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJ4In0.c2ln", "wirekube-relay")
	f.Add("a.eyJhdWQiOlsid2lyZWt1YmUtcmVsYXkiXX0.b", "wirekube-relay")
	f.Fuzz(func(t *testing.T, tok, audience string) {
		// The answer only picks a 401 reason; it must never panic, and a
		// payload without an aud claim never reports another audience.
		other := claimsOtherAudience(tok, audience)
		var claims map[string]any
		if other && (unverifiedClaims(tok, &claims) != nil || claims["aud"] == nil) {
			t.Fatalf("%q reported another audience without an aud claim", tok)
		}
	})
}

func TestTokenInURL(t *testing.T) {
	jwt := "eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3OTk5OTk5OTl9.c2lnbmF0dXJl"
	tests := []struct {
		target string
		want   bool
	}{
		{"/relay", false},
		{"/relay?x=1&y=two", false},
		{"/relay?access_token=abc", true},
		{"/relay?ACCESS_TOKEN=abc", true},
		{"/relay?token=", false},
		{"/relay?token=a", true},
		{"/relay?q=" + jwt, true},
		{"/relay?q=Bearer%20" + jwt, true},
		{"/relay?" + jwt, true},
		{"/relay;x=1?a=b;token=x", true},
		{"/" + jwt, true},
		{"/relay?q=%zz", false},
		{"/relay#access_token=x", true},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			p, q, ok := splitTarget(tc.target)
			if !ok {
				t.Fatal("target rejected")
			}
			if got := hasTokenInURL(p, q); got != tc.want {
				t.Errorf("hasTokenInURL = %v, want %v", got, tc.want)
			}
		})
	}
}

func FuzzTokenInURL(f *testing.F) {
	f.Add("/relay?access_token=abc")
	f.Add("/relay?q=eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE3OTk5OTk5OTl9.c2lnbmF0dXJl")
	f.Add("https://h/relay?x=%41#frag")
	f.Fuzz(func(t *testing.T, target string) {
		p, q, ok := splitTarget(target)
		if !ok {
			return
		}
		_ = hasTokenInURL(p, q)
		if c, ok := cleanPath(p); ok && !strings.HasPrefix(c, "/") {
			t.Fatalf("clean path %q not absolute", c)
		}
	})
}

func TestOriginalTarget(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string][]string
		url     string
		want    string
		ok      bool
	}{
		{"request itself", nil, "/relay?a=b", "/relay?a=b", true},
		{"x-forwarded-uri", map[string][]string{"X-Forwarded-Uri": {"/relay"}}, "/", "/relay", true},
		{"x-original-url absolute", map[string][]string{"X-Original-Url": {"https://h.example/relay?x=1"}}, "/", "/relay?x=1", true},
		{"agreeing headers", map[string][]string{"X-Original-Uri": {"/relay"}, "X-Original-Url": {"https://h/relay"}}, "/", "/relay", true},
		{"conflict", map[string][]string{"X-Original-Uri": {"/relay"}, "X-Forwarded-Uri": {"/metrics"}}, "/", "", false},
		{"repeated", map[string][]string{"X-Original-Uri": {"/relay", "/relay"}}, "/", "", false},
		{"relative non-path", map[string][]string{"X-Original-Uri": {"relay"}}, "/", "", false},
		{"ftp url", map[string][]string{"X-Original-Url": {"ftp://h/relay"}}, "/", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := http.NewRequest("GET", "http://authz"+tc.url, nil)
			must(t, err)
			for k, v := range tc.headers {
				r.Header[k] = v
			}
			got, ok := originalTarget(r)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %q %v, want %q %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func FuzzOriginalTarget(f *testing.F) {
	f.Add("/relay", "https://h/relay", "GET")
	f.Add("/relay?x=1", "", "post")
	f.Add("", "http://[::1]:80/%2e%2e/relay", "")
	f.Fuzz(func(t *testing.T, uri, url, method string) {
		r, err := http.NewRequest("GET", "http://authz/", nil)
		if err != nil {
			t.Fatal(err)
		}
		if uri != "" {
			r.Header.Set("X-Original-Uri", uri)
		}
		if url != "" {
			r.Header.Set("X-Original-Url", url)
		}
		if method != "" {
			r.Header.Set("X-Original-Method", method)
		}
		req := requestFromHTTP(r)
		if !req.TargetInvalid && !strings.HasPrefix(req.Target, "/") {
			t.Fatalf("target %q accepted", req.Target)
		}
	})
}
