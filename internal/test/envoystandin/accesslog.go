package envoystandin

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirekube/relay-ws/internal/test/envoyconfig"
)

// accessLog writes one JSON line per request with exactly the fields of the
// json_format in envoy/envoy.yaml's relay listener, each computed from its
// command operators as Envoy would: the stand-in logs what Envoy logs, so a
// change to the shipped format (a path or header added) shows in the e2e
// suite's log scan through the stand-in too.
type accessLog struct {
	format map[string]string
	mu     sync.Mutex
	w      io.Writer
}

func newAccessLog(w io.Writer) (*accessLog, error) {
	b, err := envoyconfig.LoadShipped(envoyconfig.TLSConfig)
	if err != nil {
		return nil, err
	}
	f, err := envoyconfig.AccessLogFormat(b, "relay_tls")
	if err != nil {
		return nil, err
	}
	return &accessLog{format: f, w: w}, nil
}

// exchange is what one request did, for its access log line.
type exchange struct {
	start   time.Time
	req     *http.Request
	route   string // the envoy.yaml route name that matched
	details string // RESPONSE_CODE_DETAILS
	rec     *recorder
}

func (a *accessLog) write(x *exchange) {
	line := make(map[string]string, len(a.format))
	for k, f := range a.format {
		line[k] = commandRE.ReplaceAllStringFunc(f, x.command)
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _ = a.w.Write(append(b, '\n'))
}

// commandRE matches one command operator: %NAME%, %NAME(ARG)% and an
// optional :N length limit.
var commandRE = regexp.MustCompile(`%([A-Z_]+)(?:\(([^)%]*)\))?(?::([0-9]+))?%`)

// command evaluates one command operator; an unknown one or a missing value
// is "-", as Envoy writes it.
func (x *exchange) command(op string) string {
	m := commandRE.FindStringSubmatch(op)
	v := x.value(m[1], m[2])
	if n, err := strconv.Atoi(m[3]); err == nil && len(v) > n {
		v = v[:n]
	}
	if v == "" {
		return "-"
	}
	return v
}

func (x *exchange) value(name, arg string) string {
	switch name {
	case "START_TIME":
		return x.start.UTC().Format("2006-01-02T15:04:05.000Z")
	case "REQ":
		return headerValue(arg, func(h string) string { return requestHeader(x.req, h) })
	case "RESP":
		return headerValue(arg, x.rec.Header().Get)
	case "ROUTE_NAME":
		return x.route
	case "RESPONSE_CODE":
		return strconv.Itoa(x.rec.status())
	case "RESPONSE_CODE_DETAILS":
		return x.details
	case "DURATION":
		return strconv.FormatInt(time.Since(x.start).Milliseconds(), 10)
	case "BYTES_RECEIVED":
		return strconv.FormatInt(x.rec.received.Load(), 10)
	case "BYTES_SENT":
		return strconv.FormatInt(x.rec.sent.Load(), 10)
	case "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT":
		host, _, _ := net.SplitHostPort(x.req.RemoteAddr)
		return host
	}
	return ""
}

// headerValue reads "A" or "A?B" (B when A is absent).
func headerValue(arg string, get func(string) string) string {
	first, alt, _ := strings.Cut(arg, "?")
	if v := get(first); v != "" || alt == "" {
		return v
	}
	return get(alt)
}

func requestHeader(r *http.Request, name string) string {
	switch strings.ToLower(name) {
	case ":method":
		return r.Method
	case ":path":
		return r.URL.RequestURI()
	case ":authority", "host":
		return r.Host
	}
	return strings.Join(r.Header.Values(name), ",")
}

// recorder is the ResponseWriter of one request: it keeps the status and
// counts body bytes (both ways once the connection is upgraded). It hijacks
// for the reverse proxy's upgrade itself, so the upgraded bytes are counted.
type recorder struct {
	http.ResponseWriter
	code           atomic.Int32
	sent, received atomic.Int64
}

func (w *recorder) status() int {
	if c := w.code.Load(); c != 0 {
		return int(c)
	}
	return http.StatusOK
}

func (w *recorder) WriteHeader(code int) {
	w.code.CompareAndSwap(0, int32(code))
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(p []byte) (int, error) {
	w.code.CompareAndSwap(0, http.StatusOK)
	n, err := w.ResponseWriter.Write(p)
	w.sent.Add(int64(n))
	return n, err
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, fmt.Errorf("envoystandin: hijack: %w", err)
	}
	w.code.CompareAndSwap(0, http.StatusSwitchingProtocols)
	return &countingConn{Conn: c, w: w}, brw, nil
}

type countingConn struct {
	net.Conn
	w *recorder
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.w.received.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.w.sent.Add(int64(n))
	return n, err
}
