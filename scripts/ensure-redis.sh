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
"$(dirname "$0")/apt-install.sh" "the tests start their own servers" "${need[@]}"
# The packages start a system-wide server; the tests do not use it, so stop it where we can.
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
if command -v service >/dev/null 2>&1; then $sudo_cmd service redis-server stop >/dev/null 2>&1 || true; fi
