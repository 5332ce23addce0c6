package reexport

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"

	"github.com/wirekube/relay-ws/internal/cli"
)

// Options make Path carry the metric families of the other
// containers of the bridge's Pod: extauthz's /metrics and Envoy's
// /stats/prometheus, read on loopback at every scrape.
type Options struct {
	// ReexportMetrics are loopback http:// URLs whose text exposition is
	// appended to the bridge's own on Path. A family the bridge
	// itself exports, or an earlier URL already gave, is left out
	// (wirekube_build_info, go_*, process_*). Default none: no Path.
	ReexportMetrics []string
}

// AddFlags registers the flag on fs.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.Var(cli.NewStringList(&o.ReexportMetrics), "reexport-metrics", "loopback http:// URL (repeatable) of another container's Prometheus text metrics, served with the bridge's own on "+Path+" of --metrics-listen, for annotation scraping that reaches one port per Pod")
}

// Validate refuses a URL that is not plain http to a loopback address.
func (o *Options) Validate() error {
	var errs []error
	for _, raw := range o.ReexportMetrics {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "http" || u.Port() == "" || !isLoopbackHost(u.Hostname()) {
			errs = append(errs, fmt.Errorf("--reexport-metrics: want http://<loopback host>:<port>/<path>, got %q", raw))
		}
	}
	return errors.Join(errs...)
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
