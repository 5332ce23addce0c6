package envoyconfig

import (
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
)

// AccessLogFormat returns the JSON access log format (field name -> format
// string with command operators) of the named listener's HTTP connection
// manager: the Envoy stand-in of the e2e suite writes its access log from it,
// so its log holds exactly what Envoy's would.
func AccessLogFormat(b *bootstrapv3.Bootstrap, listener string) (map[string]string, error) {
	hcm, err := listenerHCM(b, listener)
	if err != nil {
		return nil, err
	}
	logs := hcm.GetAccessLog()
	if len(logs) == 0 {
		return nil, fmt.Errorf("envoy: listener %s has no access log", listener)
	}
	al := logs[0]
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
