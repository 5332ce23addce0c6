{{- /*
The revocation stream (docs/revocation.md): bridge.revocationAddr is both the
bridge's --revocation-addr and extauthz's --revocation-listen; the socket (when
unix:) and the per-start secret live on the "revocation" emptyDir, which only
these two containers mount. Empty turns revocation off in both: the flags are
rendered empty (an omitted flag would keep the binary's default, which is on).
*/ -}}
{{- define "gw.revocationListenArgs" -}}
{{- $b := .Values.bridge -}}
- --revocation-listen={{ $b.revocationAddr }}
{{- if $b.revocationAddr }}
- --revocation-secret-file=/run/wirekube-revocation/secret
- --revocation-max-bindings={{ int $b.maxSessions }}
{{- end }}
{{- end -}}

{{- define "gw.revocationAddrArgs" -}}
{{- $b := .Values.bridge -}}
- --revocation-addr={{ $b.revocationAddr }}
{{- if $b.revocationAddr }}
- --revocation-secret-file=/run/wirekube-revocation/secret
- --revocation-unready-after={{ $b.revocationUnreadyAfter }}
- --revocation-stale-timeout={{ $b.revocationStaleTimeout }}
{{- end }}
{{- end -}}

{{- define "gw.revocationVolume" -}}
# The revocation socket and its secret, and the public identity signing keys extauthz publishes for the
# bridge (docs/revocation.md#signing): mounted by extauthz and the bridge only. Rendered with revocation off
# too: the bridge always verifies X-WireKube-Signature against the keys extauthz writes here.
- name: revocation
  emptyDir: {medium: Memory, sizeLimit: 1Mi}
{{- include "gw.signingVolume" . }}
{{- end -}}
