{{- define "gw.securityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities: {drop: [ALL]}
  seccompProfile: {type: RuntimeDefault}
{{- end -}}

{{/* A container's extraEnv (the argument is its values block). */}}
{{- define "gw.extraEnv" -}}
{{- with .extraEnv }}
env:
{{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "gw.pullPolicy" -}}
{{- with .Values.image.pullPolicy }}
imagePullPolicy: {{ . }}
{{- end }}
{{- end -}}

{{- define "gw.envoyContainer" -}}
{{- $l := include "gw.listener" . | fromJson -}}
{{- $p := include "gw.ports" . | fromJson -}}
- name: envoy
  image: {{ .Values.envoy.image }}
  args:
  - envoy
  - --config-path
  - /etc/envoy/config/{{ .Values.envoy.config }}
  - --disable-hot-restart
  - --log-level
  - {{ .Values.envoy.logLevel }}
  - --concurrency
  - {{ include "gw.envoyConcurrency" . | quote }}
  {{- range .Values.envoy.extraArgs }}
  - {{ . }}
  {{- end }}
  ports:
  - {name: {{ $l.name }}, containerPort: {{ $l.port }}, protocol: TCP}
  - {name: envoy-metrics, containerPort: {{ $p.envoyMetrics }}, protocol: TCP}
  # /readyz goes through Envoy to the bridge, which checks the raw relay.
  readinessProbe:
    httpGet: {path: /readyz, port: {{ $l.name }}, scheme: {{ $l.scheme }}}
    periodSeconds: 5
    timeoutSeconds: 3
    failureThreshold: 2
  livenessProbe:
    tcpSocket: {port: {{ $l.name }}}
    periodSeconds: 10
    failureThreshold: 3
  lifecycle:
    # Envoy does not drain upgraded connections: keep it up while the bridge closes every session (the bridge's
    # preStop wait plus bridge.drainTimeout).
    preStop:
      sleep: {seconds: {{ include "gw.drainSeconds" . }}}
  resources:
    {{- toYaml .Values.envoy.resources | nindent 4 }}
  {{- include "gw.securityContext" . | nindent 2 }}
  volumeMounts:
  - {name: envoy-config, mountPath: /etc/envoy/config, readOnly: true}
  {{- if $l.tls }}
  - {name: tls, mountPath: /etc/envoy/tls, readOnly: true}
  {{- end }}
  - {name: tmp, mountPath: /tmp}
  {{- with .Values.envoy.extraVolumeMounts }}{{ toYaml . | nindent 2 }}{{ end }}
  {{- include "gw.extraEnv" .Values.envoy | nindent 2 }}
{{- end -}}

{{- /* --expected-relay-url: extauthz.expectedRelayURL, else wss://publicHost/relay unless publicHost is the
       example.com placeholder (RFC 2606: no agent is ever legitimately sent there), else none. */}}
{{- define "gw.expectedRelayURL" -}}
{{- $h := .Values.publicHost | default "" -}}
{{- if .Values.extauthz.expectedRelayURL -}}
{{ .Values.extauthz.expectedRelayURL }}
{{- else if and $h (ne $h "example.com") (not (hasSuffix ".example.com" $h)) -}}
wss://{{ $h }}/relay
{{- end -}}
{{- end -}}

{{- define "gw.extauthzContainer" -}}
{{- $envoy := eq .Values.front "envoy" -}}
{{- $p := include "gw.ports" . | fromJson -}}
{{- $x := .Values.extauthz -}}
- name: extauthz
  image: {{ include "gw.image" . }}
  {{- include "gw.pullPolicy" . | indent 2 }}
  command: [/usr/local/bin/wirekube-extauthz]
  args:
  - --grpc-listen={{ ternary "127.0.0.1" "" $envoy }}:{{ $p.authzGRPC }}
  - --http-listen={{ ternary "" (printf ":%d" (int $p.authzHTTP)) $envoy }}
  - --metrics-listen=:{{ $p.authzMetrics }}
  - --audience={{ $x.audience }}
  {{- range include "gw.agentServiceAccounts" . | fromJsonArray }}
  - --agent-service-account={{ . }}
  {{- end }}
  - --peer-namespace={{ include "gw.peerNamespace" . }}
  - --check-timeout={{ $x.checkTimeout }}
  {{- if ne $x.onReviewThrottled "deny" }}
  - --on-review-throttled={{ $x.onReviewThrottled }}
  {{- end }}
  {{- $hops := int .Values.envoy.clientAddress.trustedHops }}
  {{- if and $envoy (lt $hops 0) (eq .Values.envoy.config "envoy-plaintext.yaml") }}{{ $hops = 1 }}{{ end }}
  {{- if and $envoy (gt $hops 0) }}
  {{- /* Equal to Envoy's xff_num_trusted_hops (1 in envoy-plaintext.yaml, else envoy.clientAddress.trustedHops):
         the logged client address is the entry the trusted hops appended (docs/extauthz.md#client-address). */}}
  - --trusted-hops={{ $hops }}
  {{- end }}
  {{- range $x.allowServiceAccounts }}
  - --allow-service-account={{ . }}
  {{- end }}
  {{- range $x.authnOnlyPaths }}
  - --authn-only-path={{ . }}
  {{- end }}
  {{- range $x.allowedOrigins }}
  - --allowed-origins={{ . }}
  {{- end }}
  {{- if not $x.peerEvents }}
  - --peer-events=false
  {{- end }}
  {{- if not $x.meshWatch }}
  - --mesh-watch=false
  {{- else }}{{ with include "gw.expectedRelayURL" . }}
  - --expected-relay-url={{ . }}
  {{- end }}{{ end }}
  {{- if $envoy }}
  {{- /* The bridge of this Pod: past its full mark extauthz refuses or bounces new relay sessions before any
         TokenReview, and the bridge bounces only on its word (--full-bounce=authz; docs/steering.md). */}}
  - --bridge-room-url=http://127.0.0.1:{{ $p.bridgeMetrics }}/room
  {{- end }}
  {{- include "gw.revocationListenArgs" . | nindent 2 }}
  {{- include "gw.signingExtauthzArgs" . | nindent 2 }}
  {{- range $x.extraArgs }}
  - {{ . }}
  {{- end }}
  ports:
  - {name: authz-metrics, containerPort: {{ $p.authzMetrics }}, protocol: TCP}
  {{- if not $envoy }}
  - {name: authz-grpc, containerPort: {{ $p.authzGRPC }}, protocol: TCP}
  - {name: authz-http, containerPort: {{ $p.authzHTTP }}, protocol: TCP}
  {{- end }}
  readinessProbe:
    httpGet: {path: /readyz, port: authz-metrics}
    periodSeconds: 5
  livenessProbe:
    httpGet: {path: /healthz, port: authz-metrics}
    periodSeconds: 10
  resources:
    {{- toYaml $x.resources | nindent 4 }}
  {{- include "gw.securityContext" . | nindent 2 }}
  volumeMounts:
  - {name: kube-api-access, mountPath: /var/run/secrets/kubernetes.io/serviceaccount, readOnly: true}
  - {name: revocation, mountPath: /run/wirekube-revocation}
  {{- include "gw.signingMount" . | nindent 2 }}
  {{- with $x.extraVolumeMounts }}{{ toYaml . | nindent 2 }}{{ end }}
  {{- include "gw.extraEnv" $x | nindent 2 }}
{{- end -}}

{{- define "gw.bridgeContainer" -}}
{{- $envoy := eq .Values.front "envoy" -}}
{{- $p := include "gw.ports" . | fromJson -}}
{{- $b := .Values.bridge -}}
- name: bridge
  image: {{ include "gw.image" . }}
  {{- include "gw.pullPolicy" . | indent 2 }}
  command: [/usr/local/bin/wirekube-bridge]
  args:
  - --listen={{ ternary "127.0.0.1" "" $envoy }}:{{ $p.bridge }}
  - --metrics-listen=:{{ $p.bridgeMetrics }}
  - --relay-addr={{ include "gw.relayAddr" . }}
  - --max-sessions={{ int $b.maxSessions }}
  - --drain-timeout={{ $b.drainTimeout }}
  {{- if $b.drainRate }}
  - --drain-rate={{ $b.drainRate }}
  {{- end }}
  - --drain-peers={{ include "gw.name" . }}-replicas
  - --unready-at={{ int $b.unreadyAt }}
  {{- if $envoy }}
  {{- /* extauthz in this Pod draws the bounce from GET /room, before any TokenReview (--bridge-room-url). */}}
  - --full-bounce=authz
  {{- end }}
  {{- include "gw.revocationAddrArgs" . | nindent 2 }}
  - --identity-keys-file=/run/wirekube-revocation/identity-keys
  {{- if $b.debugSessions }}
  - --debug-sessions
  {{- end }}
  {{- include "gw.reexportArgs" . | indent 2 }}
  {{- range $b.extraArgs }}
  - {{ . }}
  {{- end }}
  ports:
  - {name: bridge-metrics, containerPort: {{ $p.bridgeMetrics }}, protocol: TCP}
  {{- if not $envoy }}
  - {name: http, containerPort: {{ $p.bridge }}, protocol: TCP}
  {{- end }}
  # A probe may try a second relay Pod after --relay-dial-timeout (1s).
  readinessProbe:
    httpGet: {path: /readyz, port: bridge-metrics}
    periodSeconds: 5
    timeoutSeconds: 3
  livenessProbe:
    httpGet: {path: /healthz, port: bridge-metrics}
    periodSeconds: 10
  # Serve on while the Pod's endpoint is removed, then SIGTERM starts the
  # drain: agents closed with 1001 redial into another replica (docs/bridge.md).
  lifecycle:
    preStop:
      sleep: {seconds: {{ include "gw.bridgePreStopSeconds" . }}}
  resources:
    {{- toYaml $b.resources | nindent 4 }}
  {{- include "gw.securityContext" . | nindent 2 }}
  volumeMounts:
  - {name: revocation, mountPath: /run/wirekube-revocation, readOnly: true}
  {{- with $b.extraVolumeMounts }}{{ toYaml . | nindent 2 }}{{ end }}
  {{- include "gw.extraEnv" $b | nindent 2 }}
{{- end -}}
