package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// dialer times DNS, TCP and TLS for gorilla/websocket's dial hooks and
// records each as a stage. It is used for one dial, synchronously, by one
// goroutine (gorilla calls the hook from DialContext).
type dialer struct {
	cfg    Config
	proxy  *url.URL // the forward proxy of this dial; nil: direct
	res    *Result
	now    func() time.Time
	failed bool      // a stage recorded here failed; DialContext's error is explained
	done   time.Time // end of the last stage recorded here
}

// dialTCP resolves host and connects to the first address that answers.
func (d *dialer) dialTCP(ctx context.Context, network, addr string) (net.Conn, error) {
	if d.proxy != nil {
		conn, err := d.dialViaProxy(ctx, network, addr)
		if err == nil && d.cfg.url.Scheme == "ws" {
			d.res.add(Stage{Name: StageTLS, Status: StatusSkipped, Detail: "plain ws://, no TLS"})
		}
		return conn, err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, d.failNetwork(StageDNS, 0, err)
	}
	ips, err := d.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	start := d.now()
	var nd net.Dialer
	var errs []error
	for _, ip := range ips {
		conn, err := nd.DialContext(ctx, network, net.JoinHostPort(ip, port))
		if err == nil {
			d.done = d.now()
			d.res.add(Stage{Name: StageTCP, Status: StatusOK, Duration: d.done.Sub(start),
				RemoteAddr: conn.RemoteAddr().String(), Detail: "connected to " + conn.RemoteAddr().String()})
			if d.cfg.url.Scheme == "ws" {
				d.res.add(Stage{Name: StageTLS, Status: StatusSkipped, Detail: "plain ws://, no TLS"})
			}
			return conn, nil
		}
		errs = append(errs, err)
	}
	return nil, d.failNetwork(StageTCP, d.now().Sub(start), errors.Join(errs...))
}

func (d *dialer) resolve(ctx context.Context, host string) ([]string, error) {
	start := d.now()
	whose := ""
	if d.proxy != nil {
		whose = "the proxy's host: " // the proxy resolves the gateway's
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		d.res.add(Stage{Name: StageDNS, Status: StatusSkipped, Detail: whose + "literal IP address", Addresses: []string{ip.String()}})
		return []string{ip.String()}, nil
	}
	ips, err := d.cfg.lookupHost(ctx, host)
	if err == nil && len(ips) == 0 {
		err = fmt.Errorf("no addresses for %s", host)
	}
	if err != nil {
		return nil, d.failNetwork(StageDNS, d.now().Sub(start), err)
	}
	d.res.add(Stage{Name: StageDNS, Status: StatusOK, Duration: d.now().Sub(start), Addresses: ips,
		Detail: whose + host + " -> " + strings.Join(ips, ", ")})
	return ips, nil
}

func (d *dialer) failNetwork(stage string, dur time.Duration, err error) error {
	d.failed = true
	d.res.add(Stage{Name: stage, Status: StatusFailed, Duration: dur, Error: err.Error()})
	code, fix := ExitNetwork, "check the host name and that this machine can resolve it"
	switch {
	case d.proxy != nil && stage == StageDNS:
		code, fix = ExitProxyUnreachable, "the proxy's host name does not resolve: check the proxy URL (--proxy, or HTTPS_PROXY in the agent's environment)"
	case stage == StageProxy:
		code, fix = ExitProxyUnreachable, "nothing accepted the TCP connection to the proxy: check the proxy URL's host and port and that this node may reach the proxy"
	case stage == StageTCP:
		fix = "nothing accepted the TCP connection: check the port, the gateway Service/LoadBalancer and firewalls"
	}
	d.res.fail(code, "", fix)
	return fmt.Errorf("%s: %w", stage, err)
}

// dialTLS connects and completes the TLS handshake, recording the
// certificate the server presented.
func (d *dialer) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := d.dialTCP(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	start := d.now()
	tc := tls.Client(conn, d.cfg.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = conn.Close()
		d.failed = true
		st := d.res.add(Stage{Name: StageTLS, Status: StatusFailed, Duration: d.now().Sub(start), Error: err.Error()})
		fix := d.tlsFix(err, st)
		var unknown x509.UnknownAuthorityError
		if d.proxy != nil && errors.As(err, &unknown) {
			d.res.fail(ExitProxyTLS, "", "through the proxy the gateway's certificate is not from the expected CA (issuer above): the proxy intercepts TLS; exempt the relay host from TLS inspection (an intercepting proxy would read the agent's token), or pass --ca-file if the gateway's CA is really another")
		} else {
			d.res.fail(ExitTLS, "", fix)
		}
		return nil, fmt.Errorf("tls: %w", err)
	}
	d.done = d.now()
	cs := tc.ConnectionState()
	info := certInfo(cs.PeerCertificates, d.done)
	info.Version, info.ALPN, info.Verified = tls.VersionName(cs.Version), cs.NegotiatedProtocol, !d.cfg.tls.InsecureSkipVerify
	d.res.add(Stage{Name: StageTLS, Status: StatusOK, Duration: d.done.Sub(start), TLS: info,
		Detail: fmt.Sprintf("%s, subject %q, issuer %q, expires %s (in %s)", info.Version, info.Subject, info.Issuer,
			info.NotAfter.Format(time.RFC3339), info.ExpiresIn)})
	if !info.Verified {
		d.res.warn("the certificate was not verified (--insecure-skip-verify): the token went to whoever answered")
	} else if left := info.NotAfter.Sub(d.done); left < 14*24*time.Hour {
		d.res.warn("the gateway certificate expires in %s", roundDuration(left))
	}
	return tc, nil
}

// certInfo describes the leaf certificate.
func certInfo(chain []*x509.Certificate, now time.Time) *TLSInfo {
	if len(chain) == 0 {
		return &TLSInfo{}
	}
	leaf := chain[0]
	return &TLSInfo{Subject: leaf.Subject.String(), Issuer: leaf.Issuer.String(), DNSNames: leaf.DNSNames,
		NotAfter: leaf.NotAfter.UTC(), ExpiresIn: roundDuration(leaf.NotAfter.Sub(now))}
}

func roundDuration(d time.Duration) string {
	if d > 48*time.Hour || d < -48*time.Hour {
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	return d.Round(time.Minute).String()
}

// tlsFix explains a handshake error and records the unverified certificate.
func (d *dialer) tlsFix(err error, st *Stage) string {
	var verr *tls.CertificateVerificationError
	if errors.As(err, &verr) {
		st.TLS = certInfo(verr.UnverifiedCertificates, d.now())
		st.Detail = fmt.Sprintf("certificate subject %q, issuer %q, expires %s:", st.TLS.Subject, st.TLS.Issuer,
			st.TLS.NotAfter.Format(time.RFC3339))
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		rec      tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		return "the certificate is not signed by a CA this machine trusts: pass --ca-file with the gateway's CA (the agent uses the system roots or SSL_CERT_FILE)"
	case errors.As(err, &hostname):
		return fmt.Sprintf("the certificate is not valid for %q: connect with a name it holds or reissue it", d.cfg.url.Hostname())
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "the certificate is expired or not yet valid: renew it (or check this machine's clock)"
	case errors.As(err, &rec):
		return "the endpoint does not speak TLS: use ws:// for a plain-HTTP endpoint, or the TLS port"
	default:
		return "the TLS handshake failed: check the port is the gateway's TLS listener and the proxy's TLS config"
	}
}
