{{/* The chart's name (nameOverride). */}}
{{- define "psflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name: the release name, with the chart name unless it holds it. */}}
{{- define "psflow.fullname" -}}
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

{{/* The operator's objects: Deployment, Service account, (Cluster)Role: "psflow-operator". */}}
{{- define "psflow.operatorName" -}}
{{- printf "%s-operator" (include "psflow.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "psflow.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object (Kubernetes' recommended app.kubernetes.io set), but the name. */}}
{{- define "psflow.commonLabels" -}}
helm.sh/chart: {{ include "psflow.chart" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: psflow
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "psflow.labels" -}}
{{ include "psflow.commonLabels" . }}
app.kubernetes.io/name: {{ include "psflow.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The operator's objects are named psflow-operator by their labels too: deploy/prometheus's
scrape configuration and the dashboards find its pods by app.kubernetes.io/name=psflow-operator. */}}
{{- define "psflow.operatorLabels" -}}
{{ include "psflow.commonLabels" . }}
{{ include "psflow.operatorSelectorLabels" . }}
{{- end }}

{{- define "psflow.operatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "psflow.name" . }}-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "psflow.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "psflow.operatorName" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "psflow.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Combinations the schema cannot express. */}}
{{- define "psflow.validate" -}}
{{- if and (gt (int .Values.operator.replicas) 1) (not .Values.operator.leaderElection.enabled) }}
{{- fail "operator.replicas > 1 needs operator.leaderElection.enabled: without it every replica would act on the same jobs" }}
{{- end }}
{{- if ge (float64 .Values.operator.leaderElection.renewDeadlineSeconds) (float64 .Values.operator.leaderElection.leaseDurationSeconds) }}
{{- fail "operator.leaderElection.renewDeadlineSeconds must be less than leaseDurationSeconds" }}
{{- end }}
{{- end }}
