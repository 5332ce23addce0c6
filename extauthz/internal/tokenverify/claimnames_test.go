package tokenverify

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckClaimNames(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    error // nil: accepted; errClaimNames; or any other error (errOther)
	}{
		{"kubernetes token", `{"aud":["wirekube-relay"],"exp":1,"iat":1,"iss":"i","jti":"j","kubernetes.io":{"namespace":"n","node":{"name":"a","uid":"u"},"pod":{"name":"p","uid":"u"},"serviceaccount":{"name":"s","uid":"u"}},"nbf":1,"sub":"s"}`, nil},
		{"duplicate top level", `{"sub":"a","sub":"b"}`, errClaimNames},
		{"case variant of a read claim", `{"Sub":"b"}`, errClaimNames},
		{"case variant of an unread claim", `{"warnafter":1,"WarnAfter":2}`, errClaimNames},
		{"kelvin sign folds to k", "{\"kubernetes.io\":{},\"\u212aubernetes.io\":{}}", errClaimNames},
		{"escaped duplicate", `{"sub":"a","\u0073ub":"b"}`, errClaimNames},
		{"unread name in upper case", `{"WarnAfter":1}`, nil},
		{"not an object", `[1]`, errOther},
		{"too deep", strings.Repeat(`{"a":`, 10) + "1" + strings.Repeat("}", 10), errOther},
		{"truncated", `{"sub":`, errOther},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkClaimNames([]byte(tc.payload))
			switch {
			case tc.want == nil && err != nil, tc.want == errClaimNames && err != errClaimNames,
				tc.want == errOther && (err == nil || err == errClaimNames):
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

var errOther = errors.New("any other error")

// FuzzCheckClaimNames: whatever the bytes, no panic; an accepted payload is
// one JSON object whose top-level names stay distinct under case folding
// (counted by an independent fold, strings.EqualFold), and encoding/json
// decodes it.
func FuzzCheckClaimNames(f *testing.F) {
	for _, s := range []string{`{"exp":1}`, `{"exp":1,"EXP":2}`, `{"a":{"b":[{"c":1}]}}`, `{"sub":"a","sub":"b"}`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		if checkClaimNames(payload) != nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(payload, &m); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", payload, err)
		}
		names := make([]string, 0, len(m))
		for k := range m {
			for _, seen := range names {
				if strings.EqualFold(seen, k) {
					t.Fatalf("accepted %q with names %q and %q", payload, seen, k)
				}
			}
			names = append(names, k)
		}
	})
}
