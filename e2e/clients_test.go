//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/stack"
	"github.com/wirekube/relay-ws/relayproto"
)

// Independent WebSocket clients nobody here wrote — Node's ws (npm, pinned by
// e2e/clients/node/package-lock.json) and Python websockets (Debian's
// python3-websockets) — against the bridge directly and through nginx. Each
// scenario is run by a small script under e2e/clients/; this file builds the
// relay frames, runs the script and checks every event against the contract.

// NodeWSVersion is the ws release e2e/clients/node/package.json pins.
const NodeWSVersion = "8.23.0"

// wsClient is one independent implementation.
type wsClient struct {
	name     string
	cmd      func(plan string) *exec.Cmd
	unmasked bool // the library can send an unmasked client frame
}

// clientEvent is one line a script prints.
type clientEvent struct {
	Event    string `json:"event"`
	Protocol string `json:"protocol"`
	Hex      string `json:"hex"`
	Code     int    `json:"code"`
	Reason   string `json:"reason"`
	Status   int    `json:"status"`
	Message  string `json:"message"`
}

// clientCase is one scenario and the close the contract gives it.
type clientCase struct {
	scenario  string
	wrongKey  bool // Register another key than the bound one
	closeCode int
	reason    string // close text ("" = none checked)
	echo      bool   // the Data frame to ourselves must come back byte for byte
}

var clientCases = []clientCase{
	{scenario: "fragments", closeCode: 1000, echo: true},
	{scenario: "max", closeCode: 1009, reason: string(contract.CloseFrameTooLarge), echo: true},
	{scenario: "client_close", closeCode: 4000},
	{scenario: "server_close", wrongKey: true, closeCode: 1008, reason: string(contract.CloseRegisterKeyMismatch)},
	{scenario: "text", closeCode: 1003, reason: string(contract.CloseTextMessage)},
	{scenario: "unmasked", closeCode: 1002, reason: "websocket_protocol_error"},
}

func (e *env) testWSClients(t *testing.T) {
	clients := []wsClient{e.nodeWS(t), pythonWebsockets(t)}
	caFile := filepath.Join(e.runDir, "clients", "front-ca.pem")
	fatalIf(t, os.MkdirAll(filepath.Dir(caFile), 0o755))
	fatalIf(t, os.WriteFile(caFile, e.stack.FrontCA.CertPEM, 0o644))
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			for _, target := range []string{"bridge", "nginx"} {
				for _, c := range clientCases {
					if c.scenario == "unmasked" && !cl.unmasked {
						continue // the library always masks (RFC 6455 5.3)
					}
					t.Run(target+"/"+c.scenario, func(t *testing.T) { e.runClientCase(t, cl, target, caFile, c) })
				}
			}
		})
	}
}

func (e *env) runClientCase(t *testing.T, cl wsClient, target, caFile string, c clientCase) {
	id := e.podAgent(t, "wc-"+cl.name[:2]+"-"+target[:2]+"-"+strings.ReplaceAll(c.scenario, "_", ""))
	plan := map[string]any{"scenario": c.scenario}
	switch target {
	case "bridge": // as a front would call it: extauthz's signed identity headers, no token
		plan["url"] = "ws://" + e.stack.BridgeAddr + "/relay"
		headers := map[string]string{}
		for name, vs := range e.extauthzAllow(t, id.token) {
			headers[name] = vs[0]
		}
		plan["headers"] = headers
	case "nginx":
		plan["url"] = "wss://" + e.stack.NginxAddr + "/relay"
		plan["headers"] = map[string]string{"Authorization": "Bearer " + id.token}
		plan["ca"] = caFile
	}
	key := id.key
	if c.wrongKey {
		key = e.newKey(t)
	}
	plan["register"] = hex.EncodeToString(relayproto.AppendRegister(nil, key))
	var data []byte
	switch c.scenario {
	case "fragments":
		data = relayproto.AppendData(nil, id.key, randomBytes(20000))
	case "max": // the largest relay frame: N = 65,536
		data = relayproto.AppendData(nil, id.key, randomBytes(relayproto.MaxFrameSize-1-relayproto.KeySize))
		over := binary.BigEndian.AppendUint32(nil, relayproto.MaxFrameSize+1)
		plan["oversized"] = hex.EncodeToString(append(over, byte(relayproto.TypeData)))
	}
	plan["data"] = hex.EncodeToString(data)
	events := runClient(t, cl, plan)
	checkClientEvents(t, events, c, data)
}

func checkClientEvents(t *testing.T, events []clientEvent, c clientCase, data []byte) {
	t.Helper()
	var pings, pongs, echoes int
	var closed *clientEvent
	for i, ev := range events {
		switch ev.Event {
		case "open":
			if ev.Protocol != contract.Subprotocol {
				t.Errorf("subprotocol %q, want %q", ev.Protocol, contract.Subprotocol)
			}
		case "refused", "timeout":
			t.Fatalf("client: %+v", ev)
		case "ping":
			pings++
		case "pong":
			pongs++
		case "echo":
			echoes++
			got, _ := hex.DecodeString(ev.Hex)
			if !bytes.Equal(got, data) {
				t.Errorf("echo of %d bytes differs from the %d bytes sent", len(got), len(data))
			}
		case "close":
			closed = &events[i]
		}
	}
	if c.echo && echoes != 1 {
		t.Errorf("%d echoes, want the Data frame back once", echoes)
	}
	if pings != pongs && c.scenario == "fragments" && pongsObservable(events) {
		t.Errorf("%d pings, %d pongs", pings, pongs)
	}
	if closed == nil {
		t.Fatalf("no close seen: %+v", events)
	}
	if closed.Code != c.closeCode || (c.reason != "" && closed.Reason != c.reason) {
		t.Fatalf("closed %d %q, want %d %q", closed.Code, closed.Reason, c.closeCode, c.reason)
	}
}

// pongsObservable: Node's ws reports every pong; Python websockets answers
// them inside the library (its script prints none).
func pongsObservable(events []clientEvent) bool {
	for _, ev := range events {
		if ev.Event == "pong" {
			return true
		}
	}
	return false
}

func runClient(t *testing.T, cl wsClient, plan map[string]any) []clientEvent {
	t.Helper()
	b, err := json.Marshal(plan)
	fatalIf(t, err)
	f := filepath.Join(t.TempDir(), "plan.json")
	fatalIf(t, os.WriteFile(f, b, 0o600))
	cmd := cl.cmd(f)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s\n%s", cl.name, err, out, stderr.String())
	}
	var events []clientEvent
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev clientEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s printed %q: %v", cl.name, sc.Text(), err)
		}
		events = append(events, ev)
	}
	return events
}

// nodeWS installs the pinned ws with `npm ci` into
// e2e/.cache/node-ws/<version>/ (once) and runs the Node script.
func (e *env) nodeWS(t *testing.T) wsClient {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node not found (apt-get install nodejs npm): %v", err)
	}
	src := filepath.Join(e.repo, "e2e", "clients", "node")
	cache := filepath.Join(e.repo, "e2e", ".cache", "node-ws", NodeWSVersion)
	if _, err := os.Stat(filepath.Join(cache, "node_modules", "ws", "package.json")); err != nil {
		fatalIf(t, os.MkdirAll(cache, 0o755))
		for _, name := range []string{"package.json", "package-lock.json"} {
			b, err := os.ReadFile(filepath.Join(src, name))
			fatalIf(t, err)
			fatalIf(t, os.WriteFile(filepath.Join(cache, name), b, 0o644))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = cache
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci (ws %s): %v\n%s", NodeWSVersion, err, out)
		}
	}
	script := filepath.Join(src, "ws_client.js")
	return wsClient{name: "node-ws", unmasked: true, cmd: func(plan string) *exec.Cmd {
		cmd := exec.Command(node, script, plan)
		cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(cache, "node_modules"))
		return cmd
	}}
}

// pythonWebsockets runs the Python script with the system python3 that has
// Debian's python3-websockets.
func pythonWebsockets(t *testing.T) wsClient {
	t.Helper()
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import websockets; print(websockets.__version__)").CombinedOutput(); err != nil {
		t.Fatalf("python3-websockets missing (apt-get install python3-websockets): %v\n%s", err, out)
	} else {
		t.Logf("python websockets %s", strings.TrimSpace(string(out)))
	}
	repo, err := stack.RepoRoot()
	fatalIf(t, err)
	script := filepath.Join(repo, "e2e", "clients", "python", "websockets_client.py")
	return wsClient{name: "python-websockets", cmd: func(plan string) *exec.Cmd {
		return exec.Command(py, script, plan)
	}}
}
