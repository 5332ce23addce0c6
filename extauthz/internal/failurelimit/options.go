package failurelimit

import (
	"errors"
	"flag"
	"fmt"
)

// Options bound the failed checks of one client address.
//
// The limit counts only checks that fail on what the client itself sent
// (400 and 401: no token, a malformed, forged, expired or wrong-audience
// token, a request that is no WebSocket upgrade) and it only ever turns
// such a failure into 429 source_rate_limited. A check that passes is never
// counted and never refused by it, so a stranger flooding from the address
// every agent shares (kube-proxy SNAT, a load balancer without client
// address preservation, one NAT gateway) cannot lock one agent out.
type Options struct {
	// SourceFailureBurst is how many failed checks one client address may
	// make at once before its failures are answered source_rate_limited.
	// Default 200; 0 turns the limit off.
	SourceFailureBurst int
	// SourceFailureRate refills an address's failures per second. Default 20.
	SourceFailureRate float64
	// SourceFailureAddresses bounds the addresses tracked at once; the least
	// recently seen is forgotten (and starts full again). Default 25000.
	SourceFailureAddresses int
}

// DefaultOptions are the defaults documented on the fields.
func DefaultOptions() Options {
	return Options{SourceFailureBurst: 200, SourceFailureRate: 20, SourceFailureAddresses: 25000}
}

// AddFlags registers one flag per field on fs, with o's values as defaults.
func (o *Options) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.SourceFailureBurst, "source-failure-burst", o.SourceFailureBurst,
		"failed checks (400/401) one client address may make at once before they are answered 429 source_rate_limited; passing checks are never limited (0: off)")
	fs.Float64Var(&o.SourceFailureRate, "source-failure-rate", o.SourceFailureRate, "failed checks per second refilled per client address")
	fs.IntVar(&o.SourceFailureAddresses, "source-failure-addresses", o.SourceFailureAddresses, "client addresses whose failures are tracked at once (least recently seen forgotten)")
}

// Validate reports every invalid option, each naming its flag.
func (o *Options) Validate() error {
	var errs []error
	if o.SourceFailureBurst < 0 {
		errs = append(errs, fmt.Errorf("--source-failure-burst: want >= 0, got %d", o.SourceFailureBurst))
	}
	if o.SourceFailureBurst > 0 && !(o.SourceFailureRate > 0 && o.SourceFailureRate <= 1e6) {
		errs = append(errs, fmt.Errorf("--source-failure-rate: want > 0 and at most 1e6, got %v", o.SourceFailureRate))
	}
	if o.SourceFailureBurst > 0 && o.SourceFailureAddresses < 1 {
		errs = append(errs, fmt.Errorf("--source-failure-addresses: want >= 1, got %d", o.SourceFailureAddresses))
	}
	return errors.Join(errs...)
}
