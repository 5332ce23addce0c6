{{- /* WireKube's namespace (wirekube.namespace) and the four values that name it. Each explicit value wins; an
empty one follows wirekube.namespace, so a WireKube installed elsewhere needs one value. */ -}}

{{- /* gw.agentServiceAccounts is extauthz.agentServiceAccounts, or [<wirekube.namespace>/wirekube-agent], as JSON. */ -}}
{{- define "gw.agentServiceAccounts" -}}
{{- .Values.extauthz.agentServiceAccounts | default (list (printf "%s/wirekube-agent" .Values.wirekube.namespace)) | toJson -}}
{{- end -}}

{{- /* gw.peerNamespace is extauthz.peerNamespace, or wirekube.namespace. */ -}}
{{- define "gw.peerNamespace" -}}
{{- .Values.extauthz.peerNamespace | default .Values.wirekube.namespace -}}
{{- end -}}

{{- /* gw.relayNamespace is networkPolicy.relayNamespace, or wirekube.namespace. */ -}}
{{- define "gw.relayNamespace" -}}
{{- .Values.networkPolicy.relayNamespace | default .Values.wirekube.namespace -}}
{{- end -}}

{{- /* gw.relayAddr is bridge.relayAddr, or the WireKube chart's headless relay Service in wirekube.namespace. */ -}}
{{- define "gw.relayAddr" -}}
{{- .Values.bridge.relayAddr | default (printf "wirekube-relay-control.%s.svc.cluster.local:3478" .Values.wirekube.namespace) -}}
{{- end -}}
