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

{{- define "gw.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "gw.validate" -}}
{{- if not (has .Values.front (list "envoy" "none")) -}}
{{- fail (printf "front: want envoy or none, got %q" .Values.front) -}}
{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- fail "replicas: must be at least 1" -}}
{{- end -}}
{{- if and (eq .Values.front "none") (not .Values.networkPolicy.enabled) -}}
{{- fail "front=none needs networkPolicy.enabled: the bridge trusts identity headers and listens on the Pod address" -}}
{{- end -}}
{{- end -}}
