#!/usr/bin/env bash
# Usage: hack/install-package.sh PACKAGE COMMAND...
# Installs the distribution's PACKAGE when any of its COMMANDs is missing from
# the PATH: the tools the tests and the demo run for real (`make prometheus`:
# Prometheus and promtool, for the alert rules' unit tests and the demo;
# `make redis`: redis-server, through which the tests of router/share and the
# replays of several routers exchange demand). Idempotent: returns at once
# when every COMMAND is on the PATH. Needs apt-get (Debian, Ubuntu) and root
# or sudo; the service the package installs is not started here.
set -euo pipefail
if (($# < 2)); then
  printf 'usage: %s PACKAGE COMMAND...\n' "$0" >&2
  exit 2
fi
package=$1
shift
log() { printf 'install-package %s: %s\n' "$package" "$*" >&2; }
installed() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null || return 1
  done
}

if installed "$@"; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  log "$* missing and there is no apt-get: install $package from your distribution so that $* are on the PATH"
  exit 1
fi
sudo=()
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null; then
    log "installing the $package package needs root: run 'apt-get install $package' as root"
    exit 1
  fi
  sudo=(sudo)
fi
log "installing Debian's $package package ($*)"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y --no-install-recommends "$package" >/dev/null; then
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y --no-install-recommends "$package" >/dev/null
fi
installed "$@"
log "installed $("$1" --version 2>&1 | head -1)"
