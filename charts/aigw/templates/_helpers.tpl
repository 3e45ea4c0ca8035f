{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "aigw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, plus the chart name unless it already holds it. */}}
{{- define "aigw.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "aigw.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "aigw.labels" -}}
helm.sh/chart: {{ include "aigw.chart" . }}
{{ include "aigw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: aigw
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "aigw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "aigw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "aigw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "aigw.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository:tag, or repository@digest when a digest is set. */}}
{{- define "aigw.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag | toString) }}
{{- end }}
{{- end }}

{{/* Where the token Secret is mounted, and the file the operator reads. */}}
{{- define "aigw.tokenDir" -}}/var/run/secrets/aigw{{- end }}
{{- define "aigw.tokenFile" -}}{{ include "aigw.tokenDir" . }}/token{{- end }}

{{/* Fails the render on values the operator would reject or mis-run with. */}}
{{- define "aigw.validate" -}}
{{- if gt (int .Values.replicaCount) 1 }}
{{- fail "replicaCount: aigw has no leader election; run exactly 1 replica" }}
{{- end }}
{{- if and .Values.managementUrl (not .Values.token.existingSecret.name) }}
{{- fail "token.existingSecret.name is required when managementUrl is set (a Secret holding the bearer token)" }}
{{- end }}
{{- if and .Values.token.existingSecret.name (not .Values.managementUrl) }}
{{- fail "managementUrl is required when token.existingSecret.name is set (the operator takes --management-url and --token-file together)" }}
{{- end }}
{{- if and .Values.token.existingSecret.name (not .Values.token.existingSecret.key) }}
{{- fail "token.existingSecret.key must name the key of the token in the Secret" }}
{{- end }}
{{- if and .Values.gatewayUrl (not .Values.managementUrl) }}
{{- fail "gatewayUrl is only used with managementUrl (the default connection)" }}
{{- end }}
{{- if not (has (toString .Values.logFormat) (list "json" "text")) }}
{{- fail "logFormat must be \"json\" or \"text\"" }}
{{- end }}
{{- if le (int .Values.concurrency) 0 }}
{{- fail "concurrency must be at least 1" }}
{{- end }}
{{- if le (float64 .Values.apiQps) 0.0 }}
{{- fail "apiQps must be greater than 0" }}
{{- end }}
{{- end }}
