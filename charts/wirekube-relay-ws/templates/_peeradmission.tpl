{{- /*
gw.peerAdmission is "install" when the WireKubePeer admission policy is rendered, else why it is not (NOTES.txt
prints it). auto renders it on Kubernetes 1.30 or later (ValidatingAdmissionPolicy v1 is GA there, and the API
server puts the token's node, authentication.kubernetes.io/node-name, into the request: on by default, GA in 1.32)
unless the cluster's API list names kinds (a live cluster, or --api-versions with kinds) and not
admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy (the API turned off). An offline helm template knows only
the version. docs/revocation.md#admission.
*/ -}}
{{- define "gw.peerAdmission" -}}
{{- $mode := .Values.peerAdmission.install -}}
{{- $api := .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" -}}
{{- $kinds := .Capabilities.APIVersions.Has "apps/v1/Deployment" -}}
{{- $version := semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version -}}
{{- if eq $mode "never" -}}
not installed (peerAdmission.install=never)
{{- else if eq $mode "always" -}}
install
{{- else if and $kinds (not $api) -}}
not installed: the cluster does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy
{{- else if not $version -}}
not installed: Kubernetes {{ .Capabilities.KubeVersion.Version }} is older than 1.30 (no node name in agent requests)
{{- else -}}
install
{{- end -}}
{{- end -}}

{{- /* gw.agentUsernames is the CEL list of the agent ServiceAccounts' usernames (extauthz.agentServiceAccounts). */ -}}
{{- define "gw.agentUsernames" -}}
[{{ range $i, $sa := include "gw.agentServiceAccounts" . | fromJsonArray }}{{ if $i }}, {{ end }}'system:serviceaccount:{{ replace "/" ":" $sa }}'{{ end }}]
{{- end -}}
