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
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicaCount > 1 needs leaderElection.enabled: without it every replica would reconcile" }}
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

{{/* The id this release claims its objects under (--installation-id). */}}
{{- define "aigw.installationId" -}}
{{- .Values.installationId | default (printf "%s/%s" .Release.Namespace (include "aigw.fullname" .)) -}}
{{- end }}

{{/* The namespace of the Lease `aigw` (--leader-election-namespace). */}}
{{- define "aigw.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{/* The namespace of the Secrets Connections reference (--connection-secret-namespace). */}}
{{- define "aigw.connectionSecretNamespace" -}}
{{- default .Release.Namespace .Values.connectionSecretNamespace }}
{{- end }}

{{/* The operator's ServiceAccount as an RBAC subject. */}}
{{- define "aigw.subject" -}}
- kind: ServiceAccount
  name: {{ include "aigw.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/*
What the operator does inside a namespace it watches: a ClusterRole's rules without
watchNamespaces, each watched namespace's Role's rules with it.
*/}}
{{- define "aigw.namespacedRules" -}}
# The namespaced kinds it reconciles; patch adds and removes the aigw.io/finalizer finalizer.
- apiGroups: ["aigw.io"]
  resources: ["configs", "deployments", "ratelimitspolicies", "usagelimitspolicies", "guardrails", "apikeys", "providers"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["aigw.io"]
  resources: ["configs/status", "deployments/status", "ratelimitspolicies/status", "usagelimitspolicies/status", "guardrails/status", "apikeys/status", "providers/status"]
  verbs: ["patch"]
# Owner references with blockOwnerDeletion (the credentials Secrets a Deployment owns) need
# update on the owner's finalizers subresource where OwnerReferencesPermissionEnforcement is on.
- apiGroups: ["aigw.io"]
  resources: ["deployments/finalizers", "apikeys/finalizers"]
  verbs: ["update"]
# The credentials Secrets of Deployments: written with server-side apply (create the first
# time, patch after), read back, and watched (label app.kubernetes.io/managed-by=aigw) so that
# a deleted one is noticed at once. RBAC cannot narrow by label: the watch selector does.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "patch"]
# Events about the resources it reconciles (kube-rs Recorder: events.k8s.io/v1, created in the
# namespace of the object, patched when repeated).
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# Credential rotation restarts the listed workloads (a pod-template annotation merge patch).
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["patch"]
{{- end }}

{{/*
PromQL label matchers selecting this release's operator series in the alert rules
(monitoring.rules.selector; by default the job and namespace the ServiceMonitor gives them).
*/}}
{{- define "aigw.metricsSelector" -}}
{{- $job := printf "%s-metrics" (include "aigw.fullname" .) -}}
{{- default (printf "job=%q,namespace=%q" $job .Release.Namespace) .Values.monitoring.rules.selector -}}
{{- end }}

{{/* The labels of one alert: (list $ severity). */}}
{{- define "aigw.alertLabels" -}}
{{- $root := index . 0 -}}
severity: {{ index . 1 | quote }}
{{- with $root.Values.monitoring.rules.additionalAlertLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}
