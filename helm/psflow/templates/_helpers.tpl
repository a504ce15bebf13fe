{{/* The chart's name (nameOverride), at most 54 characters: the operator's label value
app.kubernetes.io/name is it and "-operator", within a label value's 63. */}}
{{- define "psflow.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 54 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name: the release name, with the chart name unless it holds it. At
most 46 characters, so that the longest name made of it, the Service "<it>-operator-metrics",
fits a DNS label's 63 with its suffix whole. */}}
{{- define "psflow.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 46 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 46 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 46 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The operator's objects: Deployment, Service account, (Cluster)Role: "psflow-operator". */}}
{{- define "psflow.operatorName" -}}
{{- printf "%s-operator" (include "psflow.fullname" .) }}
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
{{- /* In whole milliseconds, as the operator reads them (operator/main.cc). */}}
{{- with .Values.operator.leaderElection }}
{{- $lease := floor (mulf (float64 .leaseDurationSeconds) 1000.0) }}
{{- $renew := floor (mulf (float64 .renewDeadlineSeconds) 1000.0) }}
{{- $retry := floor (mulf (float64 .retryPeriodSeconds) 1000.0) }}
{{- if lt $lease 1000.0 }}
{{- fail "operator.leaderElection.leaseDurationSeconds must be at least 1" }}
{{- end }}
{{- if ge $renew $lease }}
{{- fail "operator.leaderElection.renewDeadlineSeconds must be less than leaseDurationSeconds" }}
{{- end }}
{{- if ge $retry $renew }}
{{- fail "operator.leaderElection.retryPeriodSeconds must be less than renewDeadlineSeconds" }}
{{- end }}
{{- if lt $retry 1.0 }}
{{- fail "operator.leaderElection.retryPeriodSeconds must be at least 0.001 (a millisecond)" }}
{{- end }}
{{- end }}
{{- end }}
