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
{{- if .Values.bridge.revocationAddr }}
# The revocation socket and its secret: mounted by extauthz and the bridge only.
- name: revocation
  emptyDir: {medium: Memory, sizeLimit: 1Mi}
{{- end }}
{{- end -}}
