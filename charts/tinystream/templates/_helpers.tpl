{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "tinystream.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the operator's objects: <release>-tinystream unless the release says it already. */}}
{{- define "tinystream.fullname" -}}
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

{{/* Labels of every object of the release, without a component. */}}
{{- define "tinystream.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "tinystream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tinystream
{{- end }}

{{/* Labels of the operator's objects. */}}
{{- define "tinystream.labels" -}}
{{ include "tinystream.commonLabels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "tinystream.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tinystream.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "tinystream.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tinystream.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "tinystream.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Namespace-wide (Role) or cluster-wide (ClusterRole) access to the watched resources. */}}
{{- define "tinystream.clusterwide" -}}
{{- if .Values.operator.watchAllNamespaces }}true{{ else }}false{{ end }}
{{- end }}

{{- /* The one namespace watched when not clusterwide: operator.watchNamespace, else the release's own. */ -}}
{{- define "tinystream.watchNamespace" -}}
{{- .Values.operator.watchNamespace | default .Release.Namespace }}
{{- end }}
