package scale

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
	"github.com/wirekube/relay-ws/internal/test/testagent"
	"github.com/wirekube/relay-ws/relayproto"
)

// The load generator runs in child processes (the test binary run again
// with GenEnv set): each holds one descriptor per agent, and the hard limit
// here is 20,000 per process.
const GenEnv = "WIREKUBE_SCALE_GEN"

// genSpec is what one generator process runs: its agents and the fronts.
type genSpec struct {
	Fronts []string // TLS fronts, one per replica
	CAFile string   // trusts the fronts' serving certificate
	Rate   float64  // agents started per second at the start
	Agents []genAgent
}

// genAgent is one agent: its index in the run, key, token and the replica
// its connections go to first (the Service's pick; the others are tried,
// in dialOrder, when its front refuses the connection, as once its
// endpoint is gone).
type genAgent struct {
	I       int
	Key     relayproto.Key
	Token   string
	Replica int
}

// Events a generator writes on stdout, one a line, times in Unix ns:
//
//	U <agent> <ns> <replica>         admitted: upgraded, registered, its own echo came back
//	D <agent> <ns> <close code>      the session ended (1006: connection lost)
//	F <agent> <ns> <status> <reason> a dial that did not upgrade
//	S <agent> <ns>                   the agent stopped: its session was revoked (1008), its Pod is gone
const (
	evUp     = "U"
	evDown   = "D"
	evFail   = "F"
	evStop   = "S"
	closePol = 1008 // RFC 6455 policy violation: every revocation close
)

// RunGeneratorIfAsked runs a load generator when GenEnv names a spec file,
// until stdin closes. Call it first in TestMain.
func RunGeneratorIfAsked() (bool, error) {
	path := os.Getenv(GenEnv)
	if path == "" {
		return false, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return true, err
	}
	var spec genSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return true, err
	}
	ca, err := os.ReadFile(spec.CAFile)
	if err != nil {
		return true, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return true, errors.New("generator: no CA certificate")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var gone goneFronts
	go func() { // stdin: "gone N" lines, then EOF when the parent is done
		gone.follow(os.Stdin)
		cancel()
	}()
	w := &eventWriter{w: bufio.NewWriterSize(os.Stdout, 64<<10)}
	go w.flushLoop(ctx)
	tlsConf := &tls.Config{RootCAs: pool, ServerName: frontName, MinVersion: tls.VersionTLS12}
	var wg sync.WaitGroup
	start := time.Now()
	for n, a := range spec.Agents {
		if spec.Rate > 0 { // ramp: the fronts' TokenReview budget is finite
			at := start.Add(time.Duration(float64(n) / spec.Rate * float64(time.Second)))
			if sleepCtx(ctx, time.Until(at)) != nil {
				break
			}
		}
		wg.Go(func() { runAgent(ctx, a, spec.Fronts, &gone, tlsConf, w) })
	}
	wg.Wait()
	w.flush()
	return true, nil
}

// errNoEndpoint is a dial while every front is out of the Service.
var errNoEndpoint = errors.New("no endpoint: connection refused")

// frontName is the fronts' certificate name; the URL's host is never
// resolved (NetDialContext picks the replica).
const frontName = "relay.example.com"

// runAgent keeps one agent connected as the real agent does
// (testagent.AgentPolicy: 1 s after a disconnect, doubling after each
// failed dial up to 30 s; keepalives every 25 s), until ctx ends or its
// session is revoked.
func runAgent(ctx context.Context, a genAgent, fronts []string, gone *goneFronts, tlsConf *tls.Config, w *eventWriter) {
	b := testagent.NewBackoff(testagent.AgentPolicy)
	rnd := rand.New(rand.NewPCG(uint64(a.I), 0x5ca1e)) // owned by this agent's goroutine
	last := testagent.Disconnected
	for first := true; ctx.Err() == nil; first = false {
		if !first && sleepCtx(ctx, b.Next(last)) != nil {
			return
		}
		last = testagent.DialFailed
		replica := -1
		o := testagent.Options{
			URL: "wss://" + frontName + contract.DefaultRelayPath, Token: a.Token, TLS: tlsConf,
			HandshakeTimeout: testagent.AgentPolicy.HandshakeTimeout,
			NetDialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var errs []error
				for _, r := range dialOrder(a, len(fronts), rnd) {
					if gone.has(r) {
						continue // no longer an endpoint of the Service
					}
					c, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", fronts[r])
					if err == nil {
						replica = r
						return c, nil
					}
					errs = append(errs, err)
				}
				if len(errs) == 0 { // a Service with no endpoint: kube-proxy rejects the connection
					return nil, errNoEndpoint
				}
				return nil, errors.Join(errs...)
			},
		}
		dctx, cancel := context.WithTimeout(ctx, testagent.AgentPolicy.HandshakeTimeout)
		c, err := testagent.Dial(dctx, o, a.Key)
		cancel()
		if err != nil {
			status, reason := 0, transportReason(err)
			var de *testagent.DialError
			if errors.As(err, &de) {
				status, reason = de.Status, cmpOr(de.Reason, "-")
			}
			w.emit(evFail, a.I, strconv.Itoa(status), reason)
			continue
		}
		stop := context.AfterFunc(ctx, c.Abort)
		code, admitted := serveAgent(c, a.Key, w, a.I, replica)
		stop()
		c.Abort()
		// The real agent counts a finished upgrade as connected: whatever
		// ends the session, its next wait is the reset one (1 s).
		last = testagent.Disconnected
		if !admitted { // upgraded but never carried its echo: bounced, or lost
			reason := "no_echo"
			if code == websocket.CloseTryAgainLater {
				reason = string(contract.CloseReplicaFull)
			}
			w.emit(evFail, a.I, "101", reason)
			continue
		}
		w.emit(evDown, a.I, strconv.Itoa(code))
		if code == closePol {
			w.emit(evStop, a.I)
			return
		}
	}
}

// serveAgent confirms the session carries data (one frame to its own key
// and back), reports the admission, then reads until the session ends and
// returns its close code (1006 without a close frame). admitted is false
// when the echo never came back; code is then the close code that ended
// it first (1013: bounced by a full replica), or 1006.
func serveAgent(c *testagent.Conn, key relayproto.Key, w *eventWriter, i, replica int) (code int, admitted bool) {
	if err := c.SendData(key, []byte("scale")); err != nil {
		return 1006, false
	}
	src, _, err := c.ReadData(30 * time.Second)
	if err != nil || !src.Equal(key) {
		if ce := testagent.CloseOf(err); ce != nil {
			return ce.Code, false
		}
		return 1006, false
	}
	w.emit(evUp, i, strconv.Itoa(replica))
	for {
		if _, _, err := c.ReadData(time.Hour); err != nil {
			if ce := testagent.CloseOf(err); ce != nil {
				return ce.Code, true
			}
			return 1006, true
		}
	}
}

// dialOrder is the agent's replica first, then the others in a random
// order drawn per dial: a Service's endpoints are picked at random, and
// the fronts that are gone refuse the connection (as an endpoint removed
// from the Service would never be picked), so a lost or drained replica's
// agents spread evenly over the replicas still there.
func dialOrder(a genAgent, n int, rnd *rand.Rand) []int {
	order := []int{a.Replica}
	for _, k := range rnd.Perm(n - 1) {
		order = append(order, (a.Replica+1+k)%n)
	}
	return order
}

// goneFronts are the fronts the parent said are not endpoints of the
// Service now: a Pod terminating (its front still carries its open
// sessions while its bridge drains, but gets no new connection) or failing
// its readiness probe (out until it passes again). Safe for concurrent
// use.
type goneFronts struct{ mask atomic.Uint64 }

func (g *goneFronts) has(i int) bool { return g.mask.Load()&(1<<uint(i)) != 0 }

// follow reads "gone N" and "back N" lines from r until it ends.
func (g *goneFronts) follow(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		verb, n, _ := strings.Cut(sc.Text(), " ")
		i, err := strconv.Atoi(n)
		if err != nil || i < 0 || i >= 64 {
			continue
		}
		bit := uint64(1) << uint(i)
		switch verb {
		case "gone":
			g.mask.Or(bit)
		case "back":
			g.mask.And(^bit)
		}
	}
}

// transportReason names a dial that got no HTTP answer: every front
// refused the connection, the handshake timed out (the agent's 10 s), or
// the connection was closed or reset before the answer.
func transportReason(err error) string {
	var ne net.Error
	// A dial tries every front: refusals by the fronts that are gone come
	// with whatever ended the dial, so they count only when nothing else
	// did.
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE):
		return "closed"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connect_refused"
	case errors.Is(err, errNoEndpoint):
		return "no_endpoint"
	}
	return "other"
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// eventWriter serializes event lines; the time is taken when the event
// happens, so the flush period does not shift any figure.
type eventWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (e *eventWriter) emit(kind string, agent int, fields ...string) {
	now := time.Now().UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.w, "%s %d %d", kind, agent, now)
	for _, f := range fields {
		e.w.WriteByte(' ')
		e.w.WriteString(f)
	}
	e.w.WriteByte('\n')
}

func (e *eventWriter) flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.w.Flush()
}

func (e *eventWriter) flushLoop(ctx context.Context) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.flush()
		}
	}
}

// generator is a running generator child, seen from the parent.
type generator struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// startGenerator runs the test binary again as a generator of spec and
// feeds its events to on.
func startGenerator(specPath string, on func(event)) (*generator, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	cmd.Env = append(os.Environ(), GenEnv+"="+specPath)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start generator: %w", err)
	}
	g := &generator{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	go func() { // owned: ends at the child's EOF; stop waits for it
		defer close(g.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if ev, ok := parseEvent(sc.Text()); ok {
				on(ev)
			}
		}
	}()
	return g, nil
}

func (g *generator) pid() int { return g.cmd.Process.Pid }

// send tells the generator front i is no longer a Service endpoint
// ("gone") or is one again ("back"). Callers serialize (endpoints.mu).
func (g *generator) send(verb string, i int) error {
	_, err := fmt.Fprintf(g.stdin, "%s %d\n", verb, i)
	return err
}

// stop closes the generator's stdin (its agents close) and waits for it.
func (g *generator) stop() {
	g.stdin.Close()
	select {
	case <-g.done:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
	_ = g.cmd.Wait()
}

// event is one parsed generator line.
type event struct {
	kind   string
	agent  int
	at     time.Time
	fields []string
}

func parseEvent(line string) (event, bool) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return event{}, false
	}
	i, err1 := strconv.Atoi(f[1])
	ns, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return event{}, false
	}
	return event{kind: f[0], agent: i, at: time.Unix(0, ns), fields: f[3:]}, true
}
