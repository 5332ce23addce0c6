//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// testFrontMatrix runs every case through every front of the matrix.
func (e *env) testFrontMatrix(t *testing.T) {
	m := e.newFrontMatrix(t)
	for _, r := range m.rows {
		t.Run(r.name, func(t *testing.T) {
			t.Logf("%s runs %s", r.name, r.runs)
			a := e.matrixAgent(t, r, "a")
			t.Run("session_register_data_both_ways", func(t *testing.T) { e.matrixSession(t, r, a) })
			for _, c := range denyCases {
				t.Run("deny/"+c.name, func(t *testing.T) {
					want := r.expect(c)
					am, bm := r.authHop.Mark(), r.bridgeHop.Mark()
					got := c.send(t, e, m, r, a)
					if got.status != want.status || got.reason != string(want.reason) {
						t.Fatalf("HTTP %d reason %q, want HTTP %d %q (%s)", got.status, got.reason, want.status, want.reason, want.why)
					}
					if want.status == http.StatusUnauthorized && !strings.HasPrefix(got.header.Get("WWW-Authenticate"), "Bearer") {
						t.Errorf("401 without WWW-Authenticate: Bearer")
					}
					if want.status == http.StatusServiceUnavailable && got.header.Get("Retry-After") == "" {
						t.Errorf("503 without Retry-After")
					}
					if got.reason != "" && got.header.Get("Cache-Control") != "no-store" {
						t.Errorf("deny %s with Cache-Control %q, want no-store", got.reason, got.header.Get("Cache-Control"))
					}
					checkRefuser(t, r, c, am, bm)
				})
			}
			t.Run("hardening/identity_headers_stripped", func(t *testing.T) { e.matrixSpoof(t, r, a) })
			t.Run("hardening/authorization_removed", func(t *testing.T) { e.matrixAuthorization(t, r, a) })
			t.Run("hardening/client_address_from_the_front", func(t *testing.T) { e.matrixClientAddress(t, r) })
			if r.ownLogs {
				t.Run("hardening/token_never_logged", func(t *testing.T) { e.matrixLogs(t, r, a) })
			}
		})
	}
	t.Run("idle_through_fronts", func(t *testing.T) { e.testIdleThroughFronts(t, m) })
}

// matrixAgent is a Pod-bound agent whose tokens the row tracks.
func (e *env) matrixAgent(t *testing.T, r *frontRow, s string) identity {
	id := e.podAgent(t, r.short+"-"+s)
	r.track(id.token)
	return id
}

// freshToken is a new, never used Pod-bound token of id (no cache hit).
func (e *env) freshToken(t *testing.T, r *frontRow, id identity) string {
	return r.track(e.tokenFor(t, stack.Namespace, agentSA, stack.TokenOptions{
		BoundKind: "Pod", BoundName: id.pod.Name, BoundUID: string(id.pod.UID)}))
}

// matrixSession: two agents through the front, Register, Data both ways
// with every byte checked, from 1 byte to the largest relay frame.
func (e *env) matrixSession(t *testing.T, r *frontRow, a identity) {
	b := e.matrixAgent(t, r, "b")
	ca, cb := session(t, r.front, a), session(t, r.front, b)
	for _, n := range []int{1, 4096, relayproto.MaxFrameSize - 1 - relayproto.KeySize} {
		for _, dir := range []struct {
			from, to   *testagent.Conn
			kfrom, kto relayproto.Key
		}{{ca, cb, a.key, b.key}, {cb, ca, b.key, a.key}} {
			payload := randomBytes(n)
			fatalIf(t, dir.from.SendData(dir.kto, payload))
			src, got, err := dir.to.ReadData(ioTimeout)
			fatalIf(t, err)
			if !src.Equal(dir.kfrom) || !bytes.Equal(got, payload) {
				t.Fatalf("%d-byte Data: received %d bytes from %s, want the bytes sent from %s", n, len(got), src, dir.kfrom)
			}
		}
	}
}

// answer is what a client sees for a refused request.
type answer struct {
	status int
	reason contract.Reason
	why    string // where a front departs from the contract
}

type gotAnswer struct {
	status int
	reason string
	header http.Header
}

// denyCase is one column of the deny table: the contract's answer and how
// to provoke it.
type denyCase struct {
	name string
	want answer
	send func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer
}

var denyCases = []denyCase{
	{"400_token_in_url", answer{status: 400, reason: contract.ReasonTokenInURL},
		func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer {
			o := r.withToken(e.freshToken(t, r, a))
			o.URL += "?access_token=" + url.QueryEscape(e.freshToken(t, r, a))
			return dialAnswer(t, o)
		}},
	{"400_authorization_repeated", answer{status: 400, reason: contract.ReasonAuthorizationRepeated},
		func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer {
			o := r.withToken("")
			o.Header = http.Header{"Authorization": {"Bearer " + e.freshToken(t, r, a), "Bearer " + e.freshToken(t, r, a)}}
			return dialAnswer(t, o)
		}},
	// A valid token on a request that is no upgrade: refused by extauthz
	// where it sees the client's Upgrade, else by the bridge (checkRefuser).
	{"400_not_websocket", answer{status: 400, reason: contract.ReasonNotWebSocket},
		func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer {
			h := http.Header{"Authorization": {"Bearer " + e.freshToken(t, r, a)}}
			got := raw(t, r.front, http.MethodGet, "/relay", h, "")
			return gotAnswer(got)
		}},
	// A well-formed upgrade with a valid token, sent as POST: the one
	// answer for "not a GET upgrade" (there is no 405), from extauthz where
	// it sees the method.
	{"400_not_websocket_post", answer{status: 400, reason: contract.ReasonNotWebSocket},
		func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer {
			got := raw(t, r.front, http.MethodPost, "/relay", upgradeHeader(e.freshToken(t, r, a)), "")
			return gotAnswer(got)
		}},
	{"401_token_missing", answer{status: 401, reason: contract.ReasonTokenMissing},
		func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer {
			return dialAnswer(t, r.withToken(""))
		}},
	{"401_token_malformed", answer{status: 401, reason: contract.ReasonTokenMalformed},
		func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer {
			return dialAnswer(t, r.withToken("not-a-jwt"))
		}},
	{"403_origin_not_allowed", answer{status: 403, reason: contract.ReasonOriginNotAllowed},
		func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer {
			o := r.withToken(e.freshToken(t, r, a))
			o.Header = http.Header{"Origin": {"https://evil.example.com"}}
			return dialAnswer(t, o)
		}},
	{"403_identity_not_allowed", answer{status: 403, reason: contract.ReasonIdentityNotAllowed},
		func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer {
			tok := r.track(e.tokenFor(t, "wirekube-system", "wirekube-other", stack.TokenOptions{}))
			return dialAnswer(t, r.withToken(tok))
		}},
	// TokenReview unavailable: the row's auth hop points at the extauthz
	// whose API link is cut, for this case only.
	{"503_review_unavailable", answer{status: 503, reason: contract.ReasonReviewUnavailable},
		func(t *testing.T, e *env, m *frontMatrix, r *frontRow, a identity) gotAnswer {
			tok := e.freshToken(t, r, a)
			back := e.stack.ExtauthzHTTP
			cut := m.cutHTTP
			if r.grpcAuth {
				back, cut = e.stack.ExtauthzGRPC, m.cutGRPC
			}
			r.authHop.SetTarget(cut)
			defer r.authHop.SetTarget(back)
			return dialAnswer(t, r.withToken(tok))
		}},
}

// expect is the answer the row's front really gives for c.
func (r *frontRow) expect(c denyCase) answer {
	w := c.want
	switch {
	case c.name == "400_authorization_repeated" && r.ownDupAuth:
		return answer{status: 400, why: "nginx refuses a duplicate Authorization header line itself, before auth_request"}
	case c.name == "400_not_websocket":
		return w // from extauthz or, where the proxy hides the upgrade from it, from the bridge: intact either way
	case r.lossy && (w.status == 400 || w.status == 503):
		return answer{status: 500, why: "auth_request turns any auth answer but 2xx, 401 and 403 into 500 (no snippet to map it back)"}
	case r.lossy:
		return answer{status: w.status, why: "auth_request keeps 401/403 but not the auth answer's headers (WWW-Authenticate excepted)"}
	}
	return w
}

// checkRefuser: a plain GET with a valid token is refused by extauthz where
// the front passes it the client's Upgrade, else by the bridge, which
// checks the upgrade on every request: it must reach the bridge exactly then.
func checkRefuser(t *testing.T, r *frontRow, c denyCase, authMark, bridgeMark int) {
	t.Helper()
	reached := len(r.bridgeHop.Since(bridgeMark)) > 0
	switch {
	case c.name == "400_not_websocket":
		if reached == r.upgradeAtAuth {
			t.Errorf("plain GET reached the bridge: %v, want %v (extauthz sees the upgrade: %v)", reached, !r.upgradeAtAuth, r.upgradeAtAuth)
		}
	case reached:
		t.Errorf("a refused request reached the bridge")
	}
}

func dialAnswer(t *testing.T, o testagent.Options) gotAnswer {
	t.Helper()
	c, err := testagent.DialRaw(context.Background(), o)
	if err == nil {
		c.Close()
		t.Fatalf("upgrade accepted, want a refusal")
	}
	var de *testagent.DialError
	if !errors.As(err, &de) {
		t.Fatalf("dial: %v, want an HTTP refusal", err)
	}
	return gotAnswer{de.Status, de.Reason, de.Header}
}

// rawErr is raw without failing the test (used while waiting for a front).
func rawErr(f front, method, target string, header http.Header) (rawResult, error) {
	req, err := http.NewRequest(method, f.base+target, nil)
	if err != nil {
		return rawResult{}, err
	}
	req.Header = header
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: f.tls, DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return rawResult{}, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return rawResult{status: resp.StatusCode, reason: resp.Header.Get(contract.HeaderDenyReason), header: resp.Header}, nil
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Host
}

// matrixLogs: nothing this row sent — tokens in the Authorization header,
// repeated, in the query string, in the path, in a cookie — is in any of
// its log files.
func (e *env) matrixLogs(t *testing.T, r *frontRow, a identity) {
	tok := e.freshToken(t, r, a)
	rawErr(r.front, http.MethodGet, "/relay/"+tok, upgradeHeader(e.freshToken(t, r, a)))
	rawErr(r.front, http.MethodGet, "/"+tok+"?token="+tok, http.Header{"Cookie": {"session=" + e.freshToken(t, r, a)}})
	time.Sleep(300 * time.Millisecond) // let the fronts write their logs
	files, err := filepath.Glob(filepath.Join(r.logDir, "*"))
	fatalIf(t, err)
	files = append(files, r.procLogs...)
	r.mu.Lock()
	tokens := append([]string(nil), r.tokens...)
	r.mu.Unlock()
	var scanned int64
	for _, name := range files {
		b, err := os.ReadFile(name)
		fatalIf(t, err)
		scanned += int64(len(b))
		for _, tk := range tokens {
			if i := bytes.Index(b, []byte(tk)); i >= 0 {
				t.Errorf("%s holds a token this row sent", name)
				break
			}
		}
	}
	if len(tokens) < 10 || scanned == 0 {
		t.Fatalf("%d tokens, %d bytes of logs in %d files: the scan would prove little", len(tokens), scanned, len(files))
	}
	t.Logf("%d tokens absent from %d log files (%d bytes)", len(tokens), len(files), scanned)
}
