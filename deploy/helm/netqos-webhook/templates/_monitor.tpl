{{/* The monitor's objects: netqos-monitor as in deploy/overlays/monitor, or <fullname>-monitor. */}}
{{- define "netqos-webhook.monitorName" -}}
{{- if .Values.fullnameOverride -}}
{{- printf "%s-monitor" (include "netqos-webhook.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- else -}}
netqos-monitor
{{- end -}}
{{- end -}}

{{- define "netqos-webhook.monitorSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/component: monitor
{{- end -}}

{{- define "netqos-webhook.monitorLabels" -}}
{{ include "netqos-webhook.monitorSelectorLabels" . }}
{{ include "netqos-webhook.helmLabels" . }}
{{- end -}}
