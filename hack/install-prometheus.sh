#!/usr/bin/env bash
# Installs Prometheus and promtool from the distribution's `prometheus` package
# when either is missing: `make test` runs the alert rules' unit tests with
# promtool, and `make demo` scrapes the router and the operator with the
# Prometheus server. Idempotent: returns at once when both are on the PATH.
# Needs apt-get (Debian, Ubuntu) and root or sudo; the service the package
# installs is not started here.
set -euo pipefail
log() { printf 'install-prometheus: %s\n' "$*" >&2; }

if command -v promtool >/dev/null && command -v prometheus >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  log "promtool and prometheus are missing and there is no apt-get: install Prometheus 2.x from your distribution so both are on the PATH"
  exit 1
fi
sudo=()
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null; then
    log "installing the prometheus package needs root: run 'apt-get install prometheus' as root"
    exit 1
  fi
  sudo=(sudo)
fi
log "installing Debian's prometheus package (prometheus and promtool)"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y --no-install-recommends prometheus >/dev/null; then
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y --no-install-recommends prometheus >/dev/null
fi
command -v promtool >/dev/null && command -v prometheus >/dev/null
log "installed $(promtool --version 2>&1 | head -1)"
