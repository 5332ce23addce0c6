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
- --identity-accepted-keys-file=/run/wirekube-identity-signing/accepted.pem
{{- end }}
{{- end -}}

{{- define "gw.signingMount" -}}
{{- if include "gw.signingShared" . }}
- {name: identity-signing, mountPath: /run/wirekube-identity-signing, readOnly: true}
{{- end }}
{{- end -}}

{{- define "gw.signingVolume" -}}
{{- if include "gw.signingShared" . }}
{{- $name := include "gw.signingSecretName" . }}
# The shared identity signing key: extauthz only. signing.pem is required (kubelet refuses to mount a listed key
# the Secret lacks); accepted.pem, the public keys of a rotation, is optional (its source is optional, so kubelet
# skips it while the Secret lacks it). A changed Secret reaches the running containers within kubelet's sync
# period; extauthz re-reads both every 10 s (no restart).
- name: identity-signing
  projected:
    defaultMode: 0440
    sources:
    - secret: {name: {{ $name }}, items: [{key: signing.pem, path: signing.pem}]}
    - secret: {name: {{ $name }}, items: [{key: accepted.pem, path: accepted.pem}], optional: true}
{{- end }}
{{- end -}}

{{- /*
gw.signingGeneratedPEM: signing.pem (base64) of the Secret the chart generates. The one the cluster holds is kept
(helm upgrade, Flux); a new key only where the cluster answered the render (helm install, Flux's first install):
a list of the release namespace's Secrets is an object there (empty, even for a namespace --create-namespace has
not created yet) and an empty map under helm template, helm lint, Argo CD and kustomize's helmCharts, which never
ask a cluster. There every render would make another key, so the chart refuses and says what to set instead.
*/ -}}
{{- define "gw.signingGeneratedPEM" -}}
{{- $old := lookup "v1" "Secret" .Release.Namespace (include "gw.signingSecretName" .) -}}
{{- $kept := dig "data" "signing.pem" "" $old -}}
{{- if $kept -}}
{{- $kept -}}
{{- else if lookup "v1" "Secret" .Release.Namespace "" -}}
{{- genPrivateKey "ed25519" | b64enc -}}
{{- else -}}
{{- fail (printf "identitySigning: front=none (or sharedKey=true) signs with one key in every replica, and this render has no cluster to keep a generated key in (helm template, Argo CD, kustomize helmCharts): each render would make another key. Create the Secret once, then set identitySigning.existingSecret to its name: kubectl -n %s create secret generic %s-identity-signing-key --from-file=signing.pem=<(openssl genpkey -algorithm ed25519) (docs/deploy.md#the-identity-signing-key)" .Release.Namespace .Release.Name) -}}
{{- end -}}
{{- end -}}
