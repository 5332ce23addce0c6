{{/* Fixed object names: one gateway per cluster, never the WireKube chart's wirekube-relay-ws. */}}
{{- define "gw.name" -}}wirekube-relay-gateway{{- end -}}

{{/* Labels on every object: the selector labels of manifests/base plus Helm's. */}}
{{- define "gw.labels" -}}
app.kubernetes.io/name: wirekube-relay-gateway
app.kubernetes.io/part-of: wirekube
{{ include "gw.helmLabels" . }}
{{- end -}}

{{- define "gw.helmLabels" -}}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gw.selector" -}}
app.kubernetes.io/name: wirekube-relay-gateway
{{- end -}}

{{/* The image: a digest (image.digest) wins over the tag; the tag defaults to the chart's appVersion, which a
test holds equal to internal/version.Release (the version this tree builds). */}}
{{- define "gw.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The one place every port of the Pod comes from: container flags, containerPorts, probes, Services,
NetworkPolicies and scrape annotations all read it. The Envoy listener's port and whether it terminates TLS are
read from the Envoy config file the container is started with (gw.listener), never assumed. */}}
{{- define "gw.ports" -}}
{"bridge": 8081, "bridgeMetrics": 9102, "authzGRPC": 9001, "authzHTTP": 9002, "authzMetrics": 9103, "envoyMetrics": 9902}
{{- end -}}

{{/* The relay listener of the selected Envoy config (files/<envoy.config>): its port, whether it has a TLS
transport socket, and the names the Pod and the Service use for it. */}}
{{- define "gw.listener" -}}
{{- $file := printf "files/%s" .Values.envoy.config -}}
{{- $cfg := .Files.Get $file | fromYaml -}}
{{- $out := dict -}}
{{- range $cfg.static_resources.listeners -}}
{{- if hasPrefix "relay" .name -}}
{{- $tls := hasKey (index .filter_chains 0) "transport_socket" -}}
{{- $_ := set $out "port" (int .address.socket_address.port_value) -}}
{{- $_ := set $out "tls" $tls -}}
{{- $_ := set $out "name" (ternary "https" "http" $tls) -}}
{{- $_ := set $out "scheme" (ternary "HTTPS" "HTTP" $tls) -}}
{{- $_ := set $out "servicePort" (ternary 443 80 $tls) -}}
{{- end -}}
{{- end -}}
{{- if not $out.port -}}
{{- fail (printf "envoy.config %s: no relay* listener in %s" .Values.envoy.config $file) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Envoy's limits, derived from the bridge's: per Pod, every session is one downstream connection and one
upstream connection to the bridge. The circuit breaker to the bridge equals bridge.maxSessions (the bridge
answers the excess itself, 503 with a reason code); the overload manager's connection cap leaves a quarter more
for denied upgrades, probes and reconnects in flight; the heap cap grows with the sessions (384 MiB per 20,000,
never below 384 MiB) and must fit under the container's memory limit. */}}
{{- define "gw.envoyLimits" -}}
{{- $s := int .Values.bridge.maxSessions -}}
{{- $heapMi := max 384 (div (mul $s 384) 20000) -}}
{"sessions": {{ $s }}, "downstream": {{ add $s (div $s 4) }}, "heapMi": {{ $heapMi }}, "heapBytes": {{ mul $heapMi 1048576 }}}
{{- end -}}

{{/* A Kubernetes quantity in bytes (a float), parsed as resource.ParseQuantity does for the forms a memory
value takes: a decimal number with a binary (Ki..Ei), decimal (k..E, m) or exponent (e6) suffix. The argument is
(list "value.name" quantity); anything else fails the render naming the value. */}}
{{- define "gw.bytes" -}}
{{- $name := index . 0 -}}
{{- $q := toString (index . 1) -}}
{{- $re := "^([0-9]+(?:\\.[0-9]*)?|\\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][-+]?[0-9]+)?$" -}}
{{- if not (regexMatch $re $q) -}}
{{- fail (printf "%s %q: not a Kubernetes memory quantity (for example 512Mi, 1Gi, 500M)" $name $q) -}}
{{- end -}}
{{- $n := float64 (regexReplaceAll $re $q "${1}") -}}
{{- $suffix := regexReplaceAll $re $q "${2}" -}}
{{- $units := dict "" 1.0 "m" 0.001 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- if hasKey $units $suffix -}}
{{- $n = mulf $n (get $units $suffix) -}}
{{- else -}}
{{- /* e+08 from a YAML number: the digits without sign or leading zeros (which would read as octal) */ -}}
{{- $neg := contains "-" $suffix -}}
{{- $e := regexReplaceAll "^[eE][-+]?0*" $suffix "" | default "0" | int -}}
{{- range until $e -}}
{{- $n = ternary (divf $n 10) (mulf $n 10) $neg -}}
{{- end -}}
{{- end -}}
{{- $n -}}
{{- end -}}

{{/* The memory floors that follow bridge.maxSessions, in MiB: Envoy's heap cap plus 64Mi; the bridge 64Mi plus
16KiB per session and extauthz 128Mi plus 12KiB per watched binding (docs/performance.md measured at most 11.2KiB
per session for the bridge at a failover peak and 10.1KiB per binding for extauthz). */}}
{{- define "gw.memoryFloors" -}}
{{- $l := include "gw.envoyLimits" . | fromJson -}}
{{- $s := int .Values.bridge.maxSessions -}}
{"envoy": {{ add $l.heapMi 64 }}, "bridge": {{ add 64 (divf (mul $s 16) 1024 | ceil) }}, "extauthz": {{ add 128 (divf (mul $s 12) 1024 | ceil) }}}
{{- end -}}

{{/* Each container's memory: requests not above limits, limits not below the floor that follows
bridge.maxSessions. */}}
{{- define "gw.validateMemory" -}}
{{- $floors := include "gw.memoryFloors" . | fromJson -}}
{{- $containers := list "bridge" "extauthz" -}}
{{- if eq .Values.front "envoy" }}{{ $containers = append $containers "envoy" }}{{ end -}}
{{- range $containers -}}
{{- $r := (index $.Values .).resources -}}
{{- $limit := dig "limits" "memory" "" $r -}}
{{- $request := dig "requests" "memory" "" $r -}}
{{- $lb := 0.0 -}}
{{- if $limit }}{{ $lb = include "gw.bytes" (list (printf "%s.resources.limits.memory" .) $limit) | float64 }}{{ end -}}
{{- if $request -}}
{{- $rb := include "gw.bytes" (list (printf "%s.resources.requests.memory" .) $request) | float64 -}}
{{- if and $limit (gt $rb $lb) -}}
{{- fail (printf "%s.resources.requests.memory %v is above %s.resources.limits.memory %v" . $request . $limit) -}}
{{- end -}}
{{- end -}}
{{- $floor := index $floors . | int -}}
{{- if and $limit (lt $lb (mulf $floor 1048576.0)) -}}
{{- $why := dict "envoy" "Envoy's heap cap plus 64Mi" "bridge" "64Mi plus 16KiB per session" "extauthz" "128Mi plus 12KiB per binding" -}}
{{- fail (printf "%s.resources.limits.memory %v is below %dMi (%s) for bridge.maxSessions=%d (docs/deploy.md#memory): raise it" . $limit $floor (get $why .) (int $.Values.bridge.maxSessions)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when the argument is an IPv4 CIDR (four decimal octets 0-255 without leading zeros, prefix 0-32) or
an IPv6 CIDR (hex groups, at most one ::, prefix 0-128), as Go's netip.ParsePrefix reads them; the IPv6 form with an
embedded IPv4 address (::ffff:10.0.0.0/104) is refused: write it in hex groups. */}}
{{- define "gw.isCIDR" -}}
{{- $parts := splitList "/" (toString .) -}}
{{- if eq (len $parts) 2 -}}
{{- $addr := index $parts 0 -}}
{{- $bits := index $parts 1 -}}
{{- $octet := "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])" -}}
{{- $v4 := printf "^%s\\.%s\\.%s\\.%s$" $octet $octet $octet $octet -}}
{{- if and (regexMatch "^(0|[1-9][0-9]?)$" $bits) (regexMatch $v4 $addr) (le (int $bits) 32) -}}true
{{- else if and (regexMatch "^(0|[1-9][0-9]{0,2})$" $bits) (le (int $bits) 128) (contains ":" $addr) -}}
{{- $halves := splitList "::" $addr -}}
{{- $groups := list -}}
{{- range $halves }}{{ if . }}{{ $groups = concat $groups (splitList ":" .) }}{{ end }}{{ end -}}
{{- $ok := and (le (len $halves) 2) (regexMatch "^[0-9A-Fa-f:]+$" $addr) -}}
{{- range $groups }}{{ if not (regexMatch "^[0-9A-Fa-f]{1,4}$" .) }}{{ $ok = false }}{{ end }}{{ end -}}
{{- if eq (len $halves) 1 }}{{ $ok = and $ok (eq (len $groups) 8) }}{{ else }}{{ $ok = and $ok (lt (len $groups) 8) }}{{ end -}}
{{- if $ok }}true{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* networkPolicy.mode as a string (YAML 1.1 reads a bare `off` as false). */}}
{{- define "gw.policyMode" -}}
{{- $m := toString .Values.networkPolicy.mode -}}
{{- ternary "off" $m (eq $m "false") -}}
{{- end -}}

{{/* The PDB is rendered unless it is disabled or there is one replica (a one-Pod PDB freezes every drain). */}}
{{- define "gw.pdbEnabled" -}}
{{- if and .Values.podDisruptionBudget.enabled (gt (int .Values.replicas) 1) -}}true{{- end -}}
{{- end -}}

{{- define "gw.validate" -}}
{{- if not (has .Values.front (list "envoy" "none")) -}}
{{- fail (printf "front: want envoy or none, got %q" .Values.front) -}}
{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- fail "replicas: must be at least 1" -}}
{{- end -}}
{{- if hasKey .Values.networkPolicy "enabled" -}}
{{- fail "networkPolicy.enabled is gone: set networkPolicy.mode (off or enforce; docs/upgrading.md)" -}}
{{- end -}}
{{- $mode := include "gw.policyMode" . -}}
{{- if eq $mode "migrate" -}}
{{- fail "networkPolicy.mode=migrate is gone: agents on transport tcp reach the relay through its LoadBalancer from node, LB or client addresses, so no CIDR tells them from strangers. Keep mode off until wirekube-relay-probe sessions --every-peer exits 0, then set enforce (docs/alongside-chart.md#lock-down)" -}}
{{- end -}}
{{- if .Values.networkPolicy.migrationNodeCIDRs -}}
{{- fail "networkPolicy.migrationNodeCIDRs is gone with mode migrate: remove it (docs/upgrading.md, NetworkPolicy)" -}}
{{- end -}}
{{- include "gw.validateMemory" . -}}
{{- $port := regexReplaceAll "^.*:([0-9]+)$" (include "gw.relayAddr" .) "${1}" | int -}}
{{- if or (lt $port 1) (gt $port 65535) -}}
{{- fail (printf "bridge.relayAddr %q: the port must be 1-65535" (include "gw.relayAddr" .)) -}}
{{- end -}}
{{- with .Values.bridge.drainRate -}}
{{- $need := ceil (divf (int $.Values.bridge.maxSessions) .) | int -}}
{{- if gt $need (int (include "gw.seconds" $.Values.bridge.drainTimeout)) -}}
{{- fail (printf "bridge.drainRate %v closes bridge.maxSessions=%d in %d s, longer than bridge.drainTimeout %s: the rest would be cut at its end. Raise drainTimeout to %ds or the rate" . (int $.Values.bridge.maxSessions) $need $.Values.bridge.drainTimeout $need) -}}
{{- end -}}
{{- end -}}
{{- range .Values.service.loadBalancerSourceRanges -}}
{{- if not (include "gw.isCIDR" .) -}}
{{- fail (printf "service.loadBalancerSourceRanges: %q is not an IPv4 or IPv6 CIDR (address/prefix)" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* An Envoy config file with its session limits set from gw.envoyLimits. Each replaced line must be in the
file exactly once (a renamed field fails the render instead of silently keeping the old limit). */}}
{{- define "gw.envoyFile" -}}
{{- $root := index . 0 -}}
{{- $file := index . 1 -}}
{{- $l := include "gw.envoyLimits" $root | fromJson -}}
{{- $s := $root.Files.Get $file -}}
{{- range $key, $value := dict "max_active_downstream_connections" $l.downstream "max_heap_size_bytes" $l.heapBytes "max_connections" $l.sessions "max_requests" $l.sessions "max_tokens" $l.sessions "max_dynamic_descriptors" $l.downstream -}}
{{- $re := printf "(?m)^(\\s+%s: )[0-9]+$" $key -}}
{{- if ne (len (regexFindAll $re $s -1)) 1 -}}
{{- fail (printf "%s: want exactly one %s line to set from bridge.maxSessions" $file $key) -}}
{{- end -}}
{{- $s = regexReplaceAll $re $s (printf "${1}%d" (int64 $value)) -}}
{{- end -}}
{{- include "gw.envoyClientAddress" (list $root $file $s) -}}
{{- end -}}

{{/* The relay listener's client address from envoy.clientAddress: trustedHops (>= 0) replaces the one
xff_num_trusted_hops line; proxyProtocol adds Envoy's proxy_protocol listener filter after the relay listener's
address (connections without a PROXY header keep their peer address, so kubelet probes still pass). The argument is
(list root file text); each replaced piece must be in the file exactly once. */}}
{{- define "gw.envoyClientAddress" -}}
{{- $root := index . 0 -}}
{{- $file := index . 1 -}}
{{- $s := index . 2 -}}
{{- $ca := $root.Values.envoy.clientAddress -}}
{{- if ge (int $ca.trustedHops) 0 -}}
{{- $re := "(?m)^(\\s+xff_num_trusted_hops: )[0-9]+$" -}}
{{- if ne (len (regexFindAll $re $s -1)) 1 -}}
{{- fail (printf "%s: want exactly one xff_num_trusted_hops line to set from envoy.clientAddress.trustedHops" $file) -}}
{{- end -}}
{{- $s = regexReplaceAll $re $s (printf "${1}%d" (int $ca.trustedHops)) -}}
{{- end -}}
{{- if $ca.proxyProtocol -}}
{{- $re := "(?m)^(  - name: relay_[a-z]+\\n    address:\\n      socket_address: [^\\n]*\\n)" -}}
{{- if ne (len (regexFindAll $re $s -1)) 1 -}}
{{- fail (printf "%s: want exactly one relay listener to add the PROXY protocol to" $file) -}}
{{- end -}}
{{- $filter := "    listener_filters:\n    - name: envoy.filters.listener.proxy_protocol\n      typed_config:\n        \"@type\": type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol\n        allow_requests_without_proxy_protocol: true\n" -}}
{{- $s = regexReplaceAll $re $s (printf "${1}%s" $filter) -}}
{{- end -}}
{{- $s -}}
{{- end -}}

{{/* Whole seconds (rounded up) of a Go duration such as 30s, 1m30s or 500ms (the schema's duration pattern). */}}
{{- define "gw.seconds" -}}
{{- $scale := dict "ns" 1e-9 "us" 1e-6 "µs" 1e-6 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9.]+(ns|us|µs|ms|s|m|h)" . -1 -}}
{{- $n := regexFind "^[0-9.]+" . -}}
{{- $total = addf $total (mulf (float64 $n) (get $scale (trimPrefix $n .))) -}}
{{- end -}}
{{- ceil $total | int -}}
{{- end -}}

{{/* The bridge's preStop wait: the Pod's endpoint is removed before SIGTERM starts the drain. */}}
{{- define "gw.bridgePreStopSeconds" -}}5{{- end -}}

{{/* The bridge's drain from the Pod's termination: its preStop wait plus bridge.drainTimeout. Envoy's preStop
sleep and the Pod's grace period follow it. */}}
{{- define "gw.drainSeconds" -}}
{{- add (include "gw.bridgePreStopSeconds" .) (include "gw.seconds" .Values.bridge.drainTimeout) -}}
{{- end -}}

{{/* Envoy's --concurrency: envoy.concurrency, else its CPU limit rounded up ("1", "1500m"), else 1. */}}
{{- define "gw.envoyConcurrency" -}}
{{- $cpu := dig "limits" "cpu" "" .Values.envoy.resources | toString -}}
{{- if .Values.envoy.concurrency -}}
{{- .Values.envoy.concurrency | int -}}
{{- else if hasSuffix "m" $cpu -}}
{{- max 1 (ceil (divf (trimSuffix "m" $cpu | float64) 1000)) | int -}}
{{- else if $cpu -}}
{{- max 1 (ceil (float64 $cpu)) | int -}}
{{- else -}}
1
{{- end -}}
{{- end -}}

{{/* ", nodePort: N" for the relay port when service.nodePort is set and the type allocates node ports. */}}
{{- define "gw.nodePort" -}}
{{- if and .Values.service.nodePort (has .Values.service.type (list "NodePort" "LoadBalancer")) -}}
, nodePort: {{ .Values.service.nodePort | int }}
{{- end -}}
{{- end -}}

{{/* The options of one monitor endpoint (the argument is podMonitor or serviceMonitor's values). */}}
{{- define "gw.monitorEndpointOptions" -}}
interval: {{ .interval }}
{{- with .scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- with .relabelings }}
relabelings: {{ toJson . }}
{{- end }}
{{- with .metricRelabelings }}
metricRelabelings: {{ toJson . }}
{{- end }}
{{- end -}}
