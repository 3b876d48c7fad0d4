{{/* The prefix of every object's name. */}}
{{- define "regionwarden.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else if contains "regionwarden" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-regionwarden" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels Helm adds to every object, beside those config/default sets. */}}
{{- define "regionwarden.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The selector of a component's pods. */}}
{{- define "regionwarden.selector" -}}
app.kubernetes.io/component: {{ . }}
app.kubernetes.io/name: regionwarden
{{- end -}}

{{/* A component's labels: its selector, part-of and Helm's. */}}
{{- define "regionwarden.labels" -}}
{{ include "regionwarden.selector" .component }}
app.kubernetes.io/part-of: regionwarden
{{ include "regionwarden.helmLabels" .root }}
{{- end -}}

{{/* An image reference and its pull policy. */}}
{{- define "regionwarden.image" -}}
image: {{ printf "%s:%s" .repository .tag }}
{{- if .pullPolicy }}
imagePullPolicy: {{ .pullPolicy }}
{{- end }}
{{- end -}}

{{/* Labels of objects of no one component: name, part-of and Helm's. */}}
{{- define "regionwarden.baseLabels" -}}
app.kubernetes.io/name: regionwarden
app.kubernetes.io/part-of: regionwarden
{{ include "regionwarden.helmLabels" . }}
{{- end -}}
