{{/* The release's name for its objects: RELEASE-sluice, at most 63 characters. */}}
{{- define "sluice.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The labels that select sluice's pods. */}}
{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels. */}}
{{- define "sluice.labels" -}}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The labels of the Redis objects: not sluice's, so that neither its
Service nor its ServiceMonitor selects them. */}}
{{- define "sluice.redisLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}-redis
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret whose key url is REDIS_URL, empty for the memory store. */}}
{{- define "sluice.redisSecret" -}}
{{- if .Values.externalRedis.existingSecret -}}
{{ .Values.externalRedis.existingSecret }}
{{- else if or .Values.redis.enabled .Values.externalRedis.url -}}
{{ include "sluice.fullname" . }}-redis
{{- end -}}
{{- end -}}
