#!/usr/bin/env bash
# Writes config/prometheus/prometheusrule.yaml: config/prometheus/rules.yaml,
# the source that promtool checks and tests, wrapped as the Prometheus
# Operator's PrometheusRule. The rules are copied line for line, comments
# included, so both files always hold the same rules (`make verify` checks).
set -euo pipefail
dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../config/prometheus" && pwd)"
{
  cat <<'YAML'
# Generated from rules.yaml by `make prometheus-rule`; edit rules.yaml.
# The Prometheus Operator loads it when its ruleSelector matches: add the
# labels your Prometheus selects on (kustomize `labels`), then
# `kubectl apply -k config/prometheus`.
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: regionwarden
  namespace: regionwarden-system
  labels:
    app.kubernetes.io/name: regionwarden
    app.kubernetes.io/part-of: regionwarden
spec:
YAML
  sed -e 's/^\(.\)/  \1/' "${dir}/rules.yaml"
} > "${dir}/prometheusrule.yaml"
