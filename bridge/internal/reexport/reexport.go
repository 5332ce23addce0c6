// Package reexport is the bridge's re-export of the metric families of the
// other containers of its Pod (--reexport-metrics): a prometheus.Gatherer
// that serves the bridge's own registry followed by the families each
// loopback URL answers, bounded in time and size. It imports nothing of
// the bridge: the registry, the URLs, the HTTP client and the bounds are
// handed to New.
package reexport

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/wirekube/relay-ws/internal/contract"
)

// Path serves, on the metrics listener, the bridge's families and
// those of the other containers of its Pod (--reexport-metrics), for a
// scraper that reaches one port and path per Pod (prometheus.io/*
// annotations). /metrics stays the bridge's own, so a scraper of every
// container's port counts nothing twice.
const Path = "/metrics/pod"

// The bridge's bounds of one re-export fetch: a slow or huge answer costs
// the scrape that family set, never the bridge's own families.
const (
	Timeout  = 5 * time.Second // the client's timeout, the whole fetch
	MaxBytes = 16 << 20        // the longest answer read
)

// metricsNamespace prefixes the room's metric name, as every bridge metric.
const metricsNamespace = contract.MetricsNamespaceBridge

// gatherer is the bridge's registry followed by the families of each URL;
// a failing URL is counted (wirekube_bridge_metrics_reexport_failures_total)
// and left out of that scrape.
type gatherer struct {
	own      prometheus.Gatherer
	urls     []string
	client   *http.Client
	maxBytes int
	failures *prometheus.CounterVec
}

// New registers the failure counter on reg and returns the Gatherer of
// Path: reg's families, then those of each URL, fetched with client (its
// Timeout bounds a fetch) and at most maxBytes long. It returns a nil
// Gatherer without URLs (no Path is served), the counter still registered.
func New(reg *prometheus.Registry, urls []string, client *http.Client, maxBytes int) (prometheus.Gatherer, error) {
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Name: "metrics_reexport_failures_total",
		Help: "Re-export fetches (--reexport-metrics) left out of a scrape, by URL and cause (unreachable, status, too_large, parse)."},
		[]string{"url", "cause"})
	if err := reg.Register(failures); err != nil {
		return nil, err
	}
	if len(urls) == 0 {
		return nil, nil
	}
	return &gatherer{own: reg, urls: urls, client: client, maxBytes: maxBytes, failures: failures}, nil
}

// Gather returns the bridge's families, then each URL's new ones. The URLs
// are read first, so a failure is counted in the same scrape.
func (g *gatherer) Gather() ([]*dto.MetricFamily, error) {
	var fetched [][]*dto.MetricFamily
	for _, u := range g.urls {
		more, cause := g.fetch(u)
		if cause != "" {
			g.failures.WithLabelValues(u, cause).Inc()
			continue
		}
		fetched = append(fetched, more)
	}
	fams, err := g.own.Gather()
	seen := map[string]bool{}
	for _, f := range fams {
		seen[f.GetName()] = true
	}
	for _, more := range fetched {
		for _, f := range more {
			if !seen[f.GetName()] {
				seen[f.GetName()] = true
				fams = append(fams, f)
			}
		}
	}
	slices.SortFunc(fams, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return fams, err
}

// fetch reads one URL's families, or the cause it failed.
func (g *gatherer) fetch(u string) ([]*dto.MetricFamily, string) {
	resp, err := g.client.Get(u)
	if err != nil {
		return nil, "unreachable"
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "status"
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(g.maxBytes)+1))
	if err != nil {
		return nil, "unreachable"
	}
	if len(body) > g.maxBytes {
		return nil, "too_large"
	}
	fams, err := parseReexport(body)
	if err != nil {
		return nil, "parse"
	}
	return fams, ""
}

// parseReexport parses a fetched answer (untrusted bytes) as a Prometheus
// text exposition into its families, sorted by name.
func parseReexport(body []byte) ([]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	byName, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}
