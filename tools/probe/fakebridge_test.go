package probe

import (
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/wsstream"
	"github.com/wirekube/relay-ws/relayproto"
)

// fakeBridge answers like the gateway (proxy + ext_authz + bridge + relay)
// as seen by a client: HTTP denies with the reason header, or an upgrade
// followed by a relay that echoes Data frames to the sender's own key.
type fakeBridge struct {
	token string         // the one bearer token accepted
	key   relayproto.Key // the key the identity is bound to
	// deny, when set, answers every upgrade with this reason.
	deny contract.Reason
	// closeCode/closeText, when set, close the session after Register.
	closeCode int
	closeText string
	// noEcho swallows Data frames instead of echoing them.
	noEcho bool
	// afterRegister, when set, is sent right after Register is accepted:
	// e.g. an Error frame, a RelayProbe, or a text message (textMessage).
	afterRegister []byte
	textMessage   bool
	// relayProbeAnswered receives the body of each RelayProbe the client
	// echoes (buffered by the test).
	relayProbeAnswered chan []byte
}

func (b *fakeBridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reason := b.deny
	if reason == "" && r.Header.Get("Authorization") == "" {
		reason = contract.ReasonTokenMissing
	} else if reason == "" && r.Header.Get("Authorization") != "Bearer "+b.token {
		reason = contract.ReasonTokenInvalid
	}
	if reason != "" {
		w.Header().Set(contract.HeaderDenyReason, string(reason))
		if reason.HTTPStatus() == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", "Bearer")
		}
		http.Error(w, string(reason), reason.HTTPStatus())
		return
	}
	up := websocket.Upgrader{Subprotocols: []string{contract.Subprotocol}}
	conn, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	b.relay(conn)
}

// relay checks Register, then echoes Data to the registered key.
func (b *fakeBridge) relay(conn *websocket.Conn) {
	fr := relayproto.NewReader(wsstream.NewReader(conn))
	f, err := fr.ReadFrame()
	if err != nil {
		return
	}
	code, text := b.closeCode, b.closeText
	if k, err := relayproto.ParseRegister(f.Body); code == 0 && (f.Type != relayproto.TypeRegister || err != nil || !k.Equal(b.key)) {
		code, text = websocket.ClosePolicyViolation, string(contract.CloseRegisterKeyMismatch)
	}
	if code != 0 {
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
		return
	}
	if b.afterRegister != nil {
		typ := websocket.BinaryMessage
		if b.textMessage {
			typ = websocket.TextMessage
		}
		if conn.WriteMessage(typ, b.afterRegister) != nil {
			return
		}
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		if f.Type == relayproto.TypeRelayProbe && b.relayProbeAnswered != nil {
			b.relayProbeAnswered <- append([]byte(nil), f.Body...)
		}
		if f.Type != relayproto.TypeData || b.noEcho {
			continue
		}
		dst, payload, err := relayproto.ParseData(f.Body)
		if err != nil || !dst.Equal(b.key) {
			continue
		}
		// Send other traffic first, split across messages, as a relay may.
		other := relayproto.AppendData(nil, relayproto.Key{9}, []byte("not for the probe"))
		echo := append(other, relayproto.AppendData(nil, b.key, payload)...)
		half := len(echo) / 2
		if conn.WriteMessage(websocket.BinaryMessage, echo[:half]) != nil ||
			conn.WriteMessage(websocket.BinaryMessage, echo[half:]) != nil {
			return
		}
	}
}

// testEnv is a fake bridge behind httptest, with the files the probe reads.
type testEnv struct {
	bridge    *fakeBridge
	srv       *httptest.Server
	tokenFile string
	caFile    string
	keyB64    string
}

const testToken = "eyJhbGciOiJSUzI1NiJ9.secret-test-token.c2lnbmF0dXJl"

func newTestEnv(t *testing.T, useTLS bool) *testEnv {
	t.Helper()
	key := relayproto.Key{1, 2, 3, 4}
	b := &fakeBridge{token: testToken, key: key}
	env := &testEnv{bridge: b, keyB64: key.Base64()}
	env.srv = httptest.NewUnstartedServer(b)
	// The TLS failure tests make handshakes fail on purpose: keep them quiet.
	env.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		env.srv.StartTLS()
		env.caFile = writeFile(t, "ca.pem", certPEM(env.srv))
	} else {
		env.srv.Start()
	}
	t.Cleanup(env.srv.Close)
	env.tokenFile = writeFile(t, "token", "\n  "+testToken+"\n")
	return env
}

// url is the relay URL of the server (ws or wss).
func (e *testEnv) url() string {
	u := "ws" + e.srv.URL[len("http"):] + contract.DefaultRelayPath
	return u
}

func (e *testEnv) args(extra ...string) []string {
	// The fake bridge speaks the agent's subprotocol only: the full test.
	a := []string{"--url", e.url(), "--token-file", e.tokenFile, "--public-key", e.keyB64, "--timeout", "5s", "--register"}
	if e.caFile != "" {
		a = append(a, "--ca-file", e.caFile)
	}
	return append(a, extra...)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func certPEM(srv *httptest.Server) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
}
