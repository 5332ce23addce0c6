package envoystandin

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestApplyHeaderOption(t *testing.T) {
	opt := func(action corev3.HeaderValueOption_HeaderAppendAction, appendVal *bool) *corev3.HeaderValueOption {
		o := &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: "x-wirekube-peer", Value: "new"}, AppendAction: action}
		if appendVal != nil {
			//lint:ignore SA1019 the deprecated field is what the stand-in must still honour.
			o.Append = wrapperspb.Bool(*appendVal)
		}
		return o
	}
	yes, no := true, false
	tests := []struct {
		name     string
		existing []string
		opt      *corev3.HeaderValueOption
		want     []string
	}{
		{"overwrite replaces", []string{"old"}, opt(corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, nil), []string{"new"}},
		{"overwrite adds", nil, opt(corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, nil), []string{"new"}},
		{"default action appends", []string{"old"}, opt(corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, nil), []string{"old", "new"}},
		{"append false overwrites", []string{"old"}, opt(corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD, &no), []string{"new"}},
		{"append true appends", []string{"old"}, opt(corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, &yes), []string{"old", "new"}},
		{"add if absent keeps", []string{"old"}, opt(corev3.HeaderValueOption_ADD_IF_ABSENT, nil), []string{"old"}},
		{"add if absent adds", nil, opt(corev3.HeaderValueOption_ADD_IF_ABSENT, nil), []string{"new"}},
		{"overwrite if exists skips", nil, opt(corev3.HeaderValueOption_OVERWRITE_IF_EXISTS, nil), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tt.existing {
				h.Add("X-WireKube-Peer", v)
			}
			applyHeaderOption(h, tt.opt)
			if got := h.Values("X-WireKube-Peer"); strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestCheckRequestAsEnvoy(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "https://relay.example.com/relay?x=1", nil)
	r.Header.Add("Authorization", "Bearer a")
	r.Header.Add("Authorization", "Bearer b")
	r.Header.Set("Upgrade", "websocket")
	r.Header.Set("X-WireKube-Peer", "spoof")
	stripClientIdentity(r.Header)
	http := checkRequest(r, "id-1").GetAttributes().GetRequest().GetHttp()
	for key, want := range map[string]string{
		"authorization": "Bearer a,Bearer b", // Envoy joins repeated values
		":path":         "/relay?x=1",
		":method":       "GET",
		":authority":    "relay.example.com",
		"upgrade":       "websocket",
		"x-request-id":  "id-1",
	} {
		if got := http.GetHeaders()[key]; got != want {
			t.Errorf("header %s = %q, want %q", key, got, want)
		}
	}
	if _, ok := http.GetHeaders()["x-wirekube-peer"]; ok {
		t.Error("client X-WireKube-Peer reached the CheckRequest")
	}
	if http.GetPath() != "/relay?x=1" || http.GetHost() != "relay.example.com" || http.GetScheme() != "https" || http.GetMethod() != "GET" {
		t.Errorf("attributes %v", http)
	}
}

func TestUnderscoreHeaderRejected(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want bool
	}{
		{http.Header{"X-Wirekube-Peer": {"a"}}, false},
		{http.Header{"X_wirekube_peer": {"a"}}, true},
		{http.Header{"Some_header": {"a"}}, true},
		{http.Header{}, false},
	} {
		if got := hasUnderscoreHeader(tc.h); got != tc.want {
			t.Errorf("hasUnderscoreHeader(%v) = %v, want %v", tc.h, got, tc.want)
		}
	}
}
