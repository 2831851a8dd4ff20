{{/*
The names of the installation. By default every object is called "netqos-webhook", as in
deploy/base, whatever the release is called: the CLI's register and status commands and the
certificate's DNS names use that name. fullnameOverride renames them all.
*/}}
{{- define "netqos-webhook.fullname" -}}
{{- default .Chart.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The labels that select the webhook's pods: exactly deploy/base's, so a Deployment first applied
with kustomize can be taken over by the chart (a Deployment's selector never changes).
*/}}
{{- define "netqos-webhook.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{/* Helm's conventional labels, added to deploy/base's on every object. */}}
{{- define "netqos-webhook.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{- define "netqos-webhook.labels" -}}
{{ include "netqos-webhook.selectorLabels" . }}
{{ include "netqos-webhook.helmLabels" . }}
{{- end -}}

{{/* The certificate objects carry only the name label, as deploy/overlays/cert-manager's do. */}}
{{- define "netqos-webhook.certificateLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
{{ include "netqos-webhook.helmLabels" . }}
{{- end -}}

{{- define "netqos-webhook.tlsSecretName" -}}
{{- if and (eq .Values.certificates.source "secret") .Values.certificates.secret.name -}}
{{- .Values.certificates.secret.name -}}
{{- else -}}
{{- printf "%s-tls" (include "netqos-webhook.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* repository:tag, or repository@digest when a digest is given (the tag is then ignored). */}}
{{- define "netqos-webhook.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The policy file's content: policy.rules when given, else files/policy.yaml, which is
deploy/base/policy.yaml itself (a symbolic link): one source for the default policy.
*/}}
{{- define "netqos-webhook.policyFile" -}}
{{- if .Values.policy.rules -}}
{{- $policy := dict "apiVersion" "netqos.io/v1alpha1" "kind" "NetQoSPolicy" "rules" .Values.policy.rules -}}
{{- with .Values.policy.schedulerWeights }}{{ $_ := set $policy "schedulerWeights" . }}{{ end -}}
{{- $policy | toYaml -}}
{{- else -}}
{{- .Files.Get "files/policy.yaml" -}}
{{- end -}}
{{- end -}}

{{/*
The rules the webhook configuration is made from (one entry per rule, objectSelector = its
podSelector), as JSON: {"rules": [...]}. With policy.existingConfigMap these are still
policy.rules (or the default policy's): list the same names and podSelectors there.
*/}}
{{- define "netqos-webhook.rules" -}}
{{- if .Values.policy.rules -}}
{{- dict "rules" .Values.policy.rules | toJson -}}
{{- else -}}
{{- $default := .Files.Get "files/policy.yaml" | fromYaml -}}
{{- if or (not $default) (hasKey $default "Error") -}}
{{- fail "files/policy.yaml (deploy/base/policy.yaml) is missing or not YAML: the chart has no default policy" -}}
{{- end -}}
{{- dict "rules" $default.rules | toJson -}}
{{- end -}}
{{- end -}}

{{/*
The ConfigMap's name: <fullname>-policy-<hash>, with the hash kustomize's configMapGenerator gives
the same data (its hasher: sha256 of the JSON {"data", "kind": "ConfigMap", "name"}, the name
empty because it is looked up as one key "metadata/name"; the first ten hex digits with 0 1 3 a e
written g h k m t). So the name equals deploy/base's and a new policy rolls the pods.
*/}}
{{- define "netqos-webhook.policyConfigMapName" -}}
{{- if .Values.policy.existingConfigMap.name -}}
{{- .Values.policy.existingConfigMap.name -}}
{{- else -}}
{{- $name := printf "%s-policy" (include "netqos-webhook.fullname" .) -}}
{{- $json := dict "kind" "ConfigMap" "name" "" "data" (dict "policy.yaml" (include "netqos-webhook.policyFile" .)) | toJson -}}
{{- $hex := sha256sum $json | trunc 10 -}}
{{- $hash := $hex | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" -}}
{{- printf "%s-%s" $name $hash -}}
{{- end -}}
{{- end -}}

{{/* The namespaces no pod is sent from: always kube-system and the release's, then the value's. */}}
{{- define "netqos-webhook.excludedNamespaces" -}}
{{- concat (list "kube-system" .Release.Namespace) .Values.webhook.excludeNamespaces | uniq | sortAlpha | toJson -}}
{{- end -}}

{{/* The rebalancer's objects: netqos-rebalance as in deploy/overlays/rebalance, or <fullname>-rebalance. */}}
{{- define "netqos-webhook.rebalanceName" -}}
{{- if .Values.fullnameOverride -}}
{{- printf "%s-rebalance" (include "netqos-webhook.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- else -}}
netqos-rebalance
{{- end -}}
{{- end -}}

{{- define "netqos-webhook.rebalanceLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/component: rebalance
{{ include "netqos-webhook.helmLabels" . }}
{{- end -}}
