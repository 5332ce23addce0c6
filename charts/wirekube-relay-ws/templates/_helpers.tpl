{{/* Fixed object names: one gateway per cluster, never the WireKube chart's wirekube-relay-ws. */}}
{{- define "gw.name" -}}wirekube-relay-gateway{{- end -}}

{{/* Labels on every object: the selector labels of manifests/base plus Helm's. */}}
{{- define "gw.labels" -}}
app.kubernetes.io/name: wirekube-relay-gateway
app.kubernetes.io/part-of: wirekube
{{ include "gw.helmLabels" . }}
{{- end -}}

{{- define "gw.helmLabels" -}}
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

{{/* A memory quantity (Mi or Gi) in MiB, 0 when it is in another unit. */}}
{{- define "gw.mebibytes" -}}
{{- $q := toString . -}}
{{- if hasSuffix "Gi" $q -}}{{ mul (int (trimSuffix "Gi" $q)) 1024 }}
{{- else if hasSuffix "Mi" $q -}}{{ int (trimSuffix "Mi" $q) }}
{{- else -}}0{{- end -}}
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
{{- if eq .Values.front "envoy" -}}
{{- $l := include "gw.envoyLimits" . | fromJson -}}
{{- $limit := include "gw.mebibytes" (dig "limits" "memory" "" .Values.envoy.resources) | int -}}
{{- if and $limit (lt $limit (int (add $l.heapMi 64))) -}}
{{- fail (printf "envoy.resources.limits.memory %s is below Envoy's heap cap %dMi (from bridge.maxSessions=%d) plus 64Mi: raise it" .Values.envoy.resources.limits.memory (int $l.heapMi) (int .Values.bridge.maxSessions)) -}}
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
{{- $s -}}
{{- end -}}
