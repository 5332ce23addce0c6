{{- /* gw.reexportArgs are the bridge's --reexport-metrics flags while the Pod carries prometheus.io/* annotations
(monitoring.annotations): they name one port and path, the bridge's 9102 /metrics/pod, which then serves extauthz's
metrics and, with front=envoy, Envoy's too, read on loopback (docs/bridge.md#reexport), so every alert can fire when
the annotations alone scrape the Pod. The PodMonitor and ServiceMonitor scrape each container's own port, and the
bridge's /metrics stays its own: nothing is counted twice. */ -}}
{{- define "gw.reexportArgs" -}}
{{- if .Values.monitoring.annotations -}}
{{- $p := include "gw.ports" . | fromJson }}
- --reexport-metrics=http://127.0.0.1:{{ $p.authzMetrics }}/metrics
{{- if eq .Values.front "envoy" }}
- --reexport-metrics=http://127.0.0.1:{{ $p.envoyMetrics }}/stats/prometheus
{{- end }}
{{- end -}}
{{- end -}}
