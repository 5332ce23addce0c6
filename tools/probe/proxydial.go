package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// dialViaProxy opens the tunnel the agent opens through a forward proxy:
// TCP to the proxy (stage proxy), then one HTTP CONNECT to the relay's
// host:port (stage connect), as gorilla/websocket v1.5.0 writes it. The
// relay's name is resolved by the proxy, not here.
func (d *dialer) dialViaProxy(ctx context.Context, network, target string) (net.Conn, error) {
	p := d.proxy
	port := p.Port()
	if port == "" {
		port = "80" // http:// only (parseProxyURL)
	}
	ips, err := d.resolve(ctx, p.Hostname())
	if err != nil {
		return nil, err
	}
	start := d.now()
	var nd net.Dialer
	var conn net.Conn
	var errs []error
	for _, ip := range ips {
		if conn, err = nd.DialContext(ctx, network, net.JoinHostPort(ip, port)); err == nil {
			break
		}
		errs = append(errs, err)
	}
	if conn == nil {
		return nil, d.failNetwork(StageProxy, d.now().Sub(start), errors.Join(errs...))
	}
	d.done = d.now()
	d.res.add(Stage{Name: StageProxy, Status: StatusOK, Duration: d.done.Sub(start), RemoteAddr: conn.RemoteAddr().String(),
		Detail: "reached proxy " + redactProxyURL(p) + " at " + conn.RemoteAddr().String()})
	if err := d.connect(ctx, conn, target); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// connect sends CONNECT target and reads the proxy's answer.
func (d *dialer) connect(ctx context.Context, conn net.Conn, target string) error {
	start := d.now()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target, Header: proxyAuthorization(d.proxy)}
	err := req.Write(conn)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(bufio.NewReader(conn), req)
	}
	_ = conn.SetDeadline(time.Time{}) // the tunnel itself has no deadline of ours
	st := Stage{Name: StageConnect, Duration: d.now().Sub(start), Status: StatusFailed}
	if err != nil {
		d.failed = true
		st.Error = "no answer to CONNECT " + target + ": " + err.Error()
		d.res.add(st)
		d.res.fail(ExitProxyUnreachable, "", "the proxy accepted TCP but did not answer CONNECT: check it is an HTTP proxy (not SOCKS, not a TLS port) and its logs")
		return fmt.Errorf("connect: %w", err)
	}
	_ = resp.Body.Close() // no body is read: the tunnel starts after the header
	st.HTTPStatus = resp.StatusCode
	st.Detail = fmt.Sprintf("CONNECT %s answered %s", target, sanitize(resp.Status, 80))
	if resp.StatusCode == http.StatusOK {
		d.done = d.now()
		st.Status, st.Duration = StatusOK, d.done.Sub(start)
		d.res.add(st)
		return nil
	}
	d.failed = true
	d.res.add(st)
	code, fix := connectRefused(resp, target, d.proxy)
	d.res.fail(code, "", fix)
	return fmt.Errorf("connect: proxy answered %d", resp.StatusCode)
}

// connectRefused classifies a CONNECT answer other than 200 by what it
// means, whichever proxy gave it. Measured with tinyproxy 1.11.1 (Debian
// 12): 407 without credentials, 401 with wrong ones, 403 for a port
// ConnectPort does not allow, 500 "Unable to connect" when it cannot
// resolve or reach the target; squid answers 503 and 504 for the same.
func connectRefused(resp *http.Response, target string, proxy *url.URL) (int, string) {
	_, port, _ := net.SplitHostPort(target)
	code := resp.StatusCode
	switch {
	case code == http.StatusProxyAuthRequired || code == http.StatusUnauthorized:
		scheme := sanitize(strings.Fields(resp.Header.Get("Proxy-Authenticate") + resp.Header.Get("WWW-Authenticate") + " -")[0], 20)
		if proxy.User == nil {
			return ExitProxyAuth, fmt.Sprintf("the proxy requires authentication (%d, %s): put the credentials in the proxy URL, http://USER:PASSWORD@HOST:PORT (HTTPS_PROXY for the agent); the agent sends Basic credentials only", code, scheme)
		}
		return ExitProxyAuth, fmt.Sprintf("the proxy refused the credentials in the proxy URL (%d, %s): check user and password; the agent sends Basic credentials only", code, scheme)
	case code == http.StatusForbidden:
		return ExitProxyRefused, fmt.Sprintf("the proxy refused CONNECT to %s (403): allow CONNECT to port %s for the relay host (tinyproxy ConnectPort, squid SSL_ports/http_access) or publish the gateway on a port the proxy allows", target, port)
	case code == http.StatusBadRequest || code == http.StatusMethodNotAllowed || code == http.StatusNotImplemented:
		return ExitProxyRefused, fmt.Sprintf("the proxy does not accept CONNECT (%d): it is not a forward proxy that tunnels HTTPS (a reverse proxy, a web server, or CONNECT turned off); use the proxy the node's HTTPS_PROXY names", code)
	case code == http.StatusTooManyRequests:
		return ExitProxyRefused, "the proxy is limiting this client (429): retry later, or ask its operator for the relay host's share"
	case code >= 500:
		return ExitProxyRefused, fmt.Sprintf("the proxy could not reach %s from its side (%d): check the proxy's DNS for the relay host, its egress to port %s, and that the gateway is up (its logs name the cause)", target, code, port)
	default:
		return ExitProxyRefused, fmt.Sprintf("the proxy refused CONNECT to %s (%d): check the proxy's access rules and logs", target, code)
	}
}
