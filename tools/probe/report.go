package probe

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Stage names, in the order a connection goes through them.
const (
	StageDNS      = "dns"
	StageProxy    = "proxy"   // through a forward proxy: TCP to the proxy
	StageConnect  = "connect" // through a forward proxy: the CONNECT answer
	StageTCP      = "tcp"
	StageTLS      = "tls"
	StageUpgrade  = "upgrade"
	StageRegister = "register"
	StageEcho     = "echo"
	StageIdle     = "idle" // --idle: the session held idle, then one more echo
)

// Modes of the probe (Result.Mode).
const (
	// ModeCheck: subprotocol wirekube.relay.probe.v1; the gateway checks the
	// key and dials the relay, nothing is registered (the default).
	ModeCheck = "check"
	// ModeRegister: Register with the relay and echo through it (--register).
	ModeRegister = "register"
)

// Stage statuses.
const (
	StatusOK      = "ok"
	StatusFailed  = "failed"
	StatusSkipped = "skipped"
)

// Stage is one step of the probe. Fields that do not apply are empty.
type Stage struct {
	Name       string        `json:"name"`
	Status     string        `json:"status"`
	Duration   time.Duration `json:"-"`
	DurationMS float64       `json:"duration_ms"`
	Detail     string        `json:"detail,omitempty"`
	Error      string        `json:"error,omitempty"`

	Addresses   []string  `json:"addresses,omitempty"`    // dns
	RemoteAddr  string    `json:"remote_addr,omitempty"`  // tcp
	TLS         *TLSInfo  `json:"tls,omitempty"`          // tls
	HTTPStatus  int       `json:"http_status,omitempty"`  // upgrade
	DenyReason  string    `json:"deny_reason,omitempty"`  // upgrade
	Subprotocol string    `json:"subprotocol,omitempty"`  // upgrade
	CloseCode   int       `json:"close_code,omitempty"`   // register, echo
	CloseReason string    `json:"close_reason,omitempty"` // register, echo
	Key         string    `json:"key_fingerprint,omitempty"`
	Echo        *EchoInfo `json:"echo,omitempty"`
}

// TLSInfo describes the server certificate.
type TLSInfo struct {
	Version   string    `json:"version,omitempty"`
	ALPN      string    `json:"alpn,omitempty"`
	Subject   string    `json:"subject,omitempty"`
	Issuer    string    `json:"issuer,omitempty"`
	DNSNames  []string  `json:"dns_names,omitempty"`
	NotAfter  time.Time `json:"not_after,omitzero"`
	ExpiresIn string    `json:"expires_in,omitempty"`
	Verified  bool      `json:"verified"`
}

// EchoInfo summarises the echo round trips.
type EchoInfo struct {
	Sent     int     `json:"sent"`
	Received int     `json:"received"`
	MinMS    float64 `json:"min_ms"`
	AvgMS    float64 `json:"avg_ms"`
	MaxMS    float64 `json:"max_ms"`
}

// Result is the whole report; the JSON output is this object.
type Result struct {
	URL      string     `json:"url"`
	Mode     string     `json:"mode"` // ModeCheck or ModeRegister
	Proxy    *ProxyInfo `json:"proxy,omitempty"`
	OK       bool       `json:"ok"`
	ExitCode int        `json:"exit_code"`
	Class    string     `json:"class"`
	Reason   string     `json:"reason,omitempty"`
	Fix      string     `json:"fix,omitempty"`
	Warnings []string   `json:"warnings,omitempty"`
	Stages   []Stage    `json:"stages"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// add appends a stage, filling in DurationMS.
func (r *Result) add(s Stage) *Stage {
	s.DurationMS = ms(s.Duration)
	r.Stages = append(r.Stages, s)
	return &r.Stages[len(r.Stages)-1]
}

// stage returns the last stage of that name, or nil.
func (r *Result) stage(name string) *Stage {
	for i := len(r.Stages) - 1; i >= 0; i-- {
		if r.Stages[i].Name == name {
			return &r.Stages[i]
		}
	}
	return nil
}

func (r *Result) warn(format string, args ...any) {
	r.Warnings = append(r.Warnings, fmt.Sprintf(format, args...))
}

// WriteText writes the human report: one line per stage, then the verdict.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "probing %s (mode %s)\n", r.URL, r.Mode)
	if p := r.Proxy; p != nil {
		via := "direct"
		if p.URL != "" {
			via = "via " + p.URL
		}
		fmt.Fprintf(&b, "proxy: %s (%s, from %s)", via, p.Mode, p.Source)
		if p.Detail != "" {
			fmt.Fprintf(&b, ": %s", p.Detail)
		}
		b.WriteString("\n")
	}
	for _, s := range r.Stages {
		mark := map[string]string{StatusOK: "ok  ", StatusFailed: "FAIL", StatusSkipped: "skip"}[s.Status]
		line := s.Detail
		if s.Error != "" {
			line = strings.TrimSpace(line + " " + s.Error)
		}
		fmt.Fprintf(&b, "  %s %-9s %8.2fms  %s\n", mark, s.Name, s.DurationMS, line)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", wn)
	}
	if r.OK {
		b.WriteString("result: ok\n")
	} else {
		fmt.Fprintf(&b, "result: %s (exit %d)", r.Class, r.ExitCode)
		if r.Reason != "" {
			fmt.Fprintf(&b, ", reason %s", r.Reason)
		}
		b.WriteString("\n")
	}
	if r.Fix != "" {
		fmt.Fprintf(&b, "fix: %s\n", r.Fix)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fail marks the result failed with an exit code, a reason and a fix. The
// first failure wins.
func (r *Result) fail(code int, reason, fix string) {
	if r.ExitCode != ExitOK {
		return
	}
	r.OK, r.ExitCode, r.Class, r.Reason, r.Fix = false, code, exitClass(code), reason, fix
}
