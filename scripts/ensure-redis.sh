#!/usr/bin/env bash
# Installs redis-server, redis-sentinel, redis-cli and curl (the examples' smoke test drives the service
# with it) from Debian's packages when any is missing.
set -euo pipefail
need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
command -v redis-sentinel >/dev/null 2>&1 || need+=(redis-sentinel)
command -v curl >/dev/null 2>&1 || need+=(curl)
[ ${#need[@]} -eq 0 ] && exit 0
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo_cmd="sudo"; else
    echo "The tests need ${need[*]}: install them (apt-get install ${need[*]}) or run as root." >&2
    exit 1
  fi
fi
echo "Installing ${need[*]} from Debian's packages (the tests start their own servers)..." >&2
$sudo_cmd apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# The packages start a system-wide server; the tests do not use it, so stop it where we can.
if command -v service >/dev/null 2>&1; then $sudo_cmd service redis-server stop >/dev/null 2>&1 || true; fi
