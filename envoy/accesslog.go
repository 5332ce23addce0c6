package envoy

import (
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
)

// AccessLogFormat returns the JSON access log format (field name -> format
// string with command operators) of the named listener's HTTP connection
// manager: the Envoy stand-in of the e2e suite writes its access log from it,
// so its log holds exactly what Envoy's would.
func AccessLogFormat(b *bootstrapv3.Bootstrap, listener string) (map[string]string, error) {
	for _, l := range b.GetStaticResources().GetListeners() {
		if l.GetName() != listener {
			continue
		}
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				hcm := &hcmv3.HttpConnectionManager{}
				if f.GetTypedConfig().UnmarshalTo(hcm) != nil {
					continue
				}
				for _, al := range hcm.GetAccessLog() {
					s := &streamv3.StdoutAccessLog{}
					if err := al.GetTypedConfig().UnmarshalTo(s); err != nil {
						return nil, fmt.Errorf("envoy: access log %s: %w", al.GetName(), err)
					}
					out := map[string]string{}
					for k, v := range s.GetLogFormat().GetJsonFormat().GetFields() {
						out[k] = v.GetStringValue()
					}
					if len(out) == 0 {
						return nil, fmt.Errorf("envoy: listener %s: access log is not a json_format of strings", listener)
					}
					return out, nil
				}
			}
		}
		return nil, fmt.Errorf("envoy: listener %s has no access log", listener)
	}
	return nil, fmt.Errorf("envoy: no listener %s", listener)
}
