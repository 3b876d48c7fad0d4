#!/usr/bin/env bash
# Installs redis-server from the distribution's package when it is missing: the
# tests of router/share and the replays of several routers exchange demand
# through a real Redis server, which they start themselves on a free loopback
# port (the service the package installs is not started here). Idempotent:
# returns at once when redis-server is on the PATH. Needs apt-get (Debian,
# Ubuntu) and root or sudo. Valkey works as well: put valkey-server on the
# PATH as redis-server.
set -euo pipefail
log() { printf 'install-redis: %s\n' "$*" >&2; }

if command -v redis-server >/dev/null; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  log "redis-server is missing and there is no apt-get: install Redis 7 (or Valkey) so redis-server is on the PATH"
  exit 1
fi
sudo=()
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null; then
    log "installing the redis-server package needs root: run 'apt-get install redis-server' as root"
    exit 1
  fi
  sudo=(sudo)
fi
log "installing Debian's redis-server package"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y --no-install-recommends redis-server >/dev/null; then
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y --no-install-recommends redis-server >/dev/null
fi
command -v redis-server >/dev/null
log "installed $(redis-server --version 2>&1 | head -1)"
