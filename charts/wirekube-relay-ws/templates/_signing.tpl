{{- /*
The identity header signature (docs/revocation.md#signing). extauthz publishes the public halves of its keys to
/run/wirekube-revocation/identity-keys; the bridge reads them there. A shared key (front=none, or
identitySigning.sharedKey) comes from a Secret mounted into extauthz only.
*/ -}}
{{- define "gw.signingShared" -}}
{{- $s := toString .Values.identitySigning.sharedKey -}}
{{- if or (eq $s "true") (and (eq $s "auto") (eq .Values.front "none")) -}}true{{- end -}}
{{- end -}}

{{- define "gw.signingSecretName" -}}
{{- .Values.identitySigning.existingSecret | default (printf "%s-identity-signing" .Release.Name) -}}
{{- end -}}

{{- define "gw.signingExtauthzArgs" -}}
- --identity-keys-file=/run/wirekube-revocation/identity-keys
{{- if include "gw.signingShared" . }}
- --identity-signing-key-file=/run/wirekube-identity-signing/signing.pem
{{- if .Values.identitySigning.existingSecret }}
- --identity-accepted-keys-file=/run/wirekube-identity-signing/accepted.pem
{{- end }}
{{- end }}
{{- end -}}

{{- define "gw.signingMount" -}}
{{- if include "gw.signingShared" . }}
- {name: identity-signing, mountPath: /run/wirekube-identity-signing, readOnly: true}
{{- end }}
{{- end -}}

{{- define "gw.signingVolume" -}}
{{- if include "gw.signingShared" . }}
# The shared identity signing key: extauthz only. A changed Secret reaches the running containers within
# kubelet's sync period; extauthz re-reads it every 10 s (no restart).
- name: identity-signing
  secret:
    secretName: {{ include "gw.signingSecretName" . }}
    defaultMode: 0440
    {{- if .Values.identitySigning.existingSecret }}
    items: [{key: signing.pem, path: signing.pem}, {key: accepted.pem, path: accepted.pem}]
    {{- end }}
{{- end }}
{{- end -}}
