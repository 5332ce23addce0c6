package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/gorilla/websocket"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Probe runs every stage against the endpoint in c and returns the report.
// It never returns the token in any field. The returned Result's ExitCode
// classifies the outcome; Run does not fail for a failed probe.
func (c Config) Probe(ctx context.Context) *Result {
	res := &Result{URL: redactURL(c.url), Mode: ModeCheck}
	if c.register {
		res.Mode = ModeRegister
		res.warn("--register: the relay replaces this key's live session, so the node's agent is disconnected and reconnects")
	}
	if c.url.Scheme == "ws" && c.token != "" {
		res.warn("ws:// sends the token in clear text: use wss:// outside a trusted network")
	}
	res.Proxy = c.proxyInfo
	if c.proxy != nil && c.url.Scheme == "ws" && c.token != "" {
		res.warn("ws:// through a proxy: the proxy sees the token")
	}
	d := &dialer{cfg: c, res: res, now: time.Now, proxy: c.proxy}
	conn := c.upgrade(ctx, d)
	if conn != nil {
		s := &session{cfg: c, res: res, conn: conn, now: time.Now}
		if c.register {
			s.run()
		} else {
			s.check()
		}
		s.close()
	}
	res.OK = res.ExitCode == ExitOK
	res.Class = exitClass(res.ExitCode)
	return res
}

// subprotocol is the one the probe offers: the agent's with --register,
// else the probe's, which the gateway never turns into a relay Register.
func (c Config) subprotocol() string {
	if c.register {
		return contract.Subprotocol
	}
	return contract.SubprotocolProbe
}

// redactURL drops the query and any user info: either may hold a secret.
func redactURL(u *url.URL) string {
	r := *u
	r.User, r.RawQuery, r.ForceQuery, r.Fragment = nil, "", false, ""
	if u.RawQuery != "" {
		return r.String() + "?<redacted>"
	}
	return r.String()
}

// upgrade dials and performs the WebSocket handshake. It returns nil when
// any stage failed (the failure is recorded in the result).
func (c Config) upgrade(ctx context.Context, d *dialer) *websocket.Conn {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	wd := &websocket.Dialer{
		NetDialContext:    d.dialTCP,
		NetDialTLSContext: d.dialTLS,
		Subprotocols:      []string{c.subprotocol()},
		HandshakeTimeout:  c.timeout,
		// Proxy stays nil: dialTCP opens the CONNECT tunnel itself (d.proxy)
		// so that each step is timed and reported.
	}
	hdr := http.Header{}
	if c.token != "" {
		hdr.Set("Authorization", "Bearer "+c.token)
	}
	start := time.Now()
	conn, resp, err := wd.DialContext(ctx, c.url.String(), hdr)
	if !d.done.IsZero() {
		start = d.done
	}
	dur := time.Since(start)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		if conn != nil {
			_ = conn.Close()
		}
		if !d.failed {
			c.upgradeFailed(d.res, dur, resp, err)
		}
		return nil
	}
	st := d.res.add(Stage{Name: StageUpgrade, Status: StatusOK, Duration: dur, HTTPStatus: resp.StatusCode,
		Subprotocol: conn.Subprotocol(), Detail: fmt.Sprintf("%s, subprotocol %q", resp.Status, conn.Subprotocol())})
	if st.Subprotocol != c.subprotocol() {
		d.res.warn("the gateway did not select subprotocol %s", c.subprotocol())
	}
	return conn
}

// upgradeFailed records a handshake that got no 101: an HTTP deny with its
// reason, or no answer at all.
func (c Config) upgradeFailed(res *Result, dur time.Duration, resp *http.Response, err error) {
	st := Stage{Name: StageUpgrade, Status: StatusFailed, Duration: dur}
	if resp == nil {
		st.Error = err.Error()
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			st.Error = "no answer to the upgrade within --timeout: " + st.Error
		}
		res.add(st)
		res.fail(ExitRejected, "", "the gateway accepted the connection but did not answer the upgrade: check the proxy's logs and upstream timeouts")
		return
	}
	reason := contract.Reason(sanitize(resp.Header.Get(contract.HeaderDenyReason), 64))
	st.HTTPStatus, st.DenyReason = resp.StatusCode, string(reason)
	st.Detail = resp.Status
	if reason != "" {
		st.Detail += ", reason " + string(reason)
	}
	res.add(st)
	fix, ok := FixFor(reason)
	if !ok {
		fix = fixForStatus(resp.StatusCode)
	}
	res.fail(exitForStatus(resp.StatusCode), string(reason), fix)
}

func exitForStatus(status int) int {
	switch status {
	case http.StatusUnauthorized:
		return ExitDenied401
	case http.StatusForbidden:
		return ExitDenied403
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return ExitUnavailable
	default:
		return ExitRejected
	}
}
